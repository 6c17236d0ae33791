package faults

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/test/simnode"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/test/wrappers"
)

// processScope is a JobSet of 2 Jobs of 2 Pods each, restarting in place
// in process scope.
func processScope(name, namespace string) *jobset.JobSet {
	rj := wrappers.MakeReplicatedJob("w").Replicas(2).Parallelism(2).Obj()
	rj.Template.Spec.BackoffLimit = nil
	rj.Template.Spec.Template.Spec.Containers[0].Command = []string{"train"}
	js := wrappers.MakeJobSet(name, namespace).ReplicatedJob(rj).
		FailurePolicy(&jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart, MaxRestarts: 5}).Obj()
	return util.SetRestartScope(js, protocol.RestartScopeProcess)
}

// expectSynced waits until every Pod of js runs its worker at the synced
// epoch, every Pod counted in sync, and returns their identities by name.
// In process scope the worker's container runs before its worker does:
// the supervisor starts the worker once the barrier lifts, so each Pod's
// start at the epoch is waited for too, as the simulated node records it.
func expectSynced(js *jobset.JobSet, want int, epoch int32) map[string]util.PodIdentity {
	GinkgoHelper()
	ids := util.ExpectWorkersRunning(ctx, k8sClient, js, want, epoch, timeout)
	Eventually(func() int32 { return util.GetJobSet(ctx, k8sClient, js).Status.SyncedPods }).
		WithTimeout(timeout).Should(Equal(int32(want)), "syncedPods")
	Eventually(func(g Gomega) {
		events, _ := recorder.EventsSince(js.Namespace, 0)
		started := map[string]bool{}
		for _, e := range events {
			if e.Kind == simnode.WorkersStarted && e.Epoch == epoch {
				started[e.Pod] = true
			}
		}
		for name := range ids {
			g.Expect(started).To(HaveKey(name), "the worker of Pod %s started at epoch %d:\n%s", name, epoch, describe(events))
		}
	}).WithTimeout(timeout).Should(Succeed())
	return ids
}

var _ = Describe("control-plane faults", Serial, func() {
	var ns *corev1.Namespace
	BeforeEach(func() {
		ns = fw.NewNamespace(ctx, k8sClient)
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
	})

	DescribeTable("an in-place restart under way completes, counted once, across a restart of",
		func(component string) {
			js := processScope("train", ns.Name)
			Expect(k8sClient.Create(ctx, js)).To(Succeed())
			before := expectSynced(js, 4, 1)

			// The workers take 4 s to stop on SIGTERM, and the component
			// stays away until they have: the agents report the new epoch
			// while it is away, and the controller must write the
			// restart's end through it once it is back.
			previous := sim.SetLatency(simnode.Latency{ProcessStop: 4 * time.Second})
			DeferCleanup(func() { sim.SetLatency(previous) })
			_, mark := recorder.EventsSince(ns.Name, 0)
			victim := util.JobSetPods(ctx, k8sClient, js)[1]
			patch := client.MergeFrom(victim.DeepCopy())
			victim.Annotations[simnode.ExitCodeAnnotation] = "1"
			Expect(k8sClient.Patch(ctx, &victim, patch)).To(Succeed())
			// Killed once every agent knows of the restart: the three
			// other workers are stopping.
			Eventually(func() int {
				events, _ := recorder.EventsSince(ns.Name, mark)
				return count(events, simnode.WorkerStopping)
			}).WithTimeout(timeout).WithPolling(20 * time.Millisecond).Should(Equal(3))
			got := util.GetJobSet(ctx, k8sClient, js)
			Expect(got.Status.SyncedEpoch).To(Equal(int32(1)), "the restart is over before the fault")

			// The victim's worker exited; the other three stop.
			var restarting time.Time
			workersStopped := func(ctx context.Context) error {
				defer func() { restarting = time.Now() }()
				return wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
					events, _ := recorder.EventsSince(ns.Name, mark)
					return count(events, simnode.WorkersStopped) >= 3, nil
				})
			}
			down, err := fw.Cluster.Restart(ctx, component, workersStopped)
			Expect(err).NotTo(HaveOccurred())
			GinkgoWriter.Printf("%s was away for %s\n", component, down)

			Expect(expectSynced(js, 4, 2)).To(Equal(before), "a Pod was recreated instead of restarted in place")
			got = util.GetJobSet(ctx, k8sClient, js)
			Expect(got.Status.Restarts).To(Equal(int32(1)), "restarts")
			Expect(got.Status.InPlaceRestarts).To(Equal(int32(1)), "inPlaceRestarts")
			// The group synced before the barriers lift: the workers
			// start right after.
			var started []time.Time
			Eventually(func(g Gomega) {
				events, _ := recorder.EventsSince(ns.Name, mark)
				started = nil
				for _, e := range events {
					if e.Kind == simnode.WorkersStarted {
						started = append(started, e.Time)
					}
				}
				g.Expect(started).To(HaveLen(4), "every worker started again once:\n%s", describe(events))
			}).WithTimeout(timeout).Should(Succeed())
			for _, t := range started {
				Expect(t).To(BeTemporally(">", restarting), "a worker started while %s was away: the restart ended without it", component)
			}

			// And the JobSet runs to its end: every worker succeeds.
			for _, p := range util.JobSetPods(ctx, k8sClient, js) {
				patch := client.MergeFrom(p.DeepCopy())
				p.Annotations[simnode.ExitCodeAnnotation] = "0"
				Expect(k8sClient.Patch(ctx, &p, patch)).To(Succeed())
			}
			Eventually(func(g Gomega) {
				got := util.GetJobSet(ctx, k8sClient, js)
				g.Expect(got.Status.TerminalState).To(Equal(jobset.TerminalStateCompleted), "conditions: %v", got.Status.Conditions)
				g.Expect(got.Status.Restarts).To(Equal(int32(1)), "restarts")
			}).WithTimeout(timeout).Should(Succeed())
		},
		Entry("the API server", "kube-apiserver"),
		Entry("etcd", "etcd"),
	)

	It("admits no JobSet a Deny policy refuses while the API server and etcd restart", func() {
		const (
			forbidden  = "faults.inplace.dev/forbidden"
			maxCreates = 300
		)
		policy := &policyv1alpha1.JobSetPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "faults-" + ns.Name},
			Spec: policyv1alpha1.JobSetPolicySpec{
				EnforcementAction: policyv1alpha1.Deny,
				Match: &policyv1alpha1.Match{NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{corev1.LabelMetadataName: ns.Name},
				}},
				Rego: fmt.Sprintf(`package faults

deny contains "faults: a forbidden JobSet" if input.object.metadata.labels[%q]
`, forbidden),
			},
		}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, policy))).To(Succeed()) })
		policy = util.ExpectPolicyReady(ctx, k8sClient, policy, metav1.ConditionTrue, timeout)

		// Creates, one forbidden for one allowed, for as long as the
		// faults last and a little after.
		var (
			stop                        = make(chan struct{})
			wg                          sync.WaitGroup
			allowedStored, refusedByUs  atomic.Int64
			forbiddenStored, otherError atomic.Int64
			allowedDenied               atomic.Int64
		)
		// Two clients, each paced and together capped: a load, not a flood.
		var next atomic.Int64
		for range 2 {
			wg.Go(func() {
				defer GinkgoRecover()
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					i := next.Add(1)
					if i > maxCreates {
						return
					}
					js := wrappers.MakeJobSet(fmt.Sprintf("js-%d", i), ns.Name).
						ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).Suspend(true).Obj()
					isForbidden := i%2 == 1
					if isForbidden {
						js.Labels = map[string]string{forbidden: "true"}
					}
					// Bounded: a create the API server's death leaves
					// hanging must not keep this client from the next.
					createCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
					err := k8sClient.Create(createCtx, js)
					cancel()
					switch {
					case err == nil && isForbidden:
						forbiddenStored.Add(1)
					case err == nil:
						allowedStored.Add(1)
					case isForbidden && containsPolicyMessage(err):
						refusedByUs.Add(1)
					case containsPolicyMessage(err):
						allowedDenied.Add(1)
					default:
						// The API server or etcd away: refused, nothing stored.
						otherError.Add(1)
					}
				}
			})
		}
		for _, component := range []string{"kube-apiserver", "etcd"} {
			down, err := fw.Cluster.Restart(ctx, component, nil)
			Expect(err).NotTo(HaveOccurred())
			GinkgoWriter.Printf("%s was away for %s\n", component, down)
		}
		// Past the faults, creates go through the webhook again.
		after := allowedStored.Load()
		refused := refusedByUs.Load()
		Eventually(func() bool { return allowedStored.Load() > after && refusedByUs.Load() > refused }).
			WithTimeout(timeout).Should(BeTrue(), "no create admitted or refused by the policy after the faults")
		close(stop)
		wg.Wait()
		GinkgoWriter.Printf("stored %d, refused by the policy %d, refused otherwise %d\n", allowedStored.Load(), refusedByUs.Load(), otherError.Load())

		Expect(forbiddenStored.Load()).To(BeZero(), "forbidden JobSets stored")
		Expect(allowedDenied.Load()).To(BeZero(), "allowed JobSets refused by the policy")
		Expect(otherError.Load()).To(BeNumerically(">", 0), "no create met the faults")
		var list jobset.JobSetList
		Expect(k8sClient.List(ctx, &list, client.InNamespace(ns.Name), client.HasLabels{forbidden})).To(Succeed())
		Expect(list.Items).To(BeEmpty(), "forbidden JobSets stored")
	})
})

// containsPolicyMessage reports whether err is the policy's refusal.
func containsPolicyMessage(err error) bool {
	return err != nil && strings.Contains(err.Error(), "faults: a forbidden JobSet")
}

// count counts the events of kind.
func count(events []simnode.Event, kind simnode.EventKind) int {
	n := 0
	for _, e := range events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// describe lists events, one a line, for a failure's message.
func describe(events []simnode.Event) string {
	var b strings.Builder
	for _, e := range events {
		fmt.Fprintf(&b, "%s %-14s %s epoch=%d\n", e.Time.Format("15:04:05.000"), e.Kind, e.Pod, e.Epoch)
	}
	return b.String()
}
