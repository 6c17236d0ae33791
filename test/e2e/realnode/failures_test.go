package realnode

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/test/util"
)

const agentContainer = "inplace-agent"

// containerID is the runtime's ID of a Pod's container, from its status.
func containerID(p corev1.Pod, name string) string {
	GinkgoHelper()
	for _, s := range util.ContainerStatuses(&p) {
		if s.Name == name {
			Expect(s.ContainerID).NotTo(BeEmpty(), "container %s of pod %s has no ID yet", name, p.Name)
			return s.ContainerID
		}
	}
	Fail("pod " + p.Name + " has no container " + name)
	return ""
}

// restartManagerWith stops the manager and starts it again with another
// in-place restart timeout.
func restartManagerWith(timeout time.Duration) {
	GinkgoHelper()
	fw.StopManager()
	inPlaceRestartTimeout = timeout
	fw.StartManager(cfg)
}

// loseNode stops a node's kubelet; the spec's cleanup starts it again and
// waits until every node is Ready, for the specs after it.
func loseNode(node string) {
	GinkgoHelper()
	Expect(fw.Cluster.StopKubelet(node)).To(Succeed())
	DeferCleanup(startKubelet, node)
}

// startKubelet starts a stopped node's kubelet and waits until its Node is
// Ready.
func startKubelet(node string) {
	GinkgoHelper()
	startCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	Expect(fw.Cluster.StartKubelet(startCtx, node)).To(Succeed())
}

// antiAffinity places the JobSet's Pods on distinct nodes: required, even
// if one is then left unscheduled; else preferred, so that a replacement
// may go beside another when no node is free.
func antiAffinity(js *jobset.JobSet, required bool) {
	term := corev1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{jobset.JobSetNameKey: js.Name}},
		TopologyKey:   corev1.LabelHostname,
	}
	a := &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: term}}}
	if required {
		a = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}
	}
	for i := range js.Spec.ReplicatedJobs {
		js.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: a}
	}
}

func nodesOf(pods map[string]util.PodIdentity) map[string]bool {
	out := map[string]bool{}
	for _, id := range pods {
		out[id.Node] = true
	}
	return out
}

var _ = inScopes(func(scope string) {
	Describe("in-place restart on real kubelets, failure kinds ("+scope+" scope)", func() {
		var ns *corev1.Namespace
		BeforeEach(func() { ns = specNamespace() })
		workerJobSet := func(name, ns string, pfp *batchv1.PodFailurePolicy, rules ...jobset.FailurePolicyRule) *jobset.JobSet {
			return util.SetRestartScope(workerJobSet(name, ns, pfp, rules...), scope)
		}

		It("an agent that crashes alone is restarted alone and resumes its epoch: no group restart", func() {
			js := workerJobSet("crash", ns.Name, nil)
			Expect(k8sClient.Create(ctx, js)).To(Succeed())
			before := expectRunning(js, 1)
			victim := podsOf(js)[0]
			restarts := watchRestarts(ns.Name)

			Expect(fw.Cluster.KillContainer(ctx, victim.Spec.NodeName, containerID(victim, agentContainer))).To(Succeed())
			Eventually(func(g Gomega) {
				var p corev1.Pod
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(&victim), &p)).To(Succeed())
				g.Expect(p.Status.InitContainerStatuses).To(ContainElement(And(
					HaveField("Name", agentContainer), HaveField("RestartCount", int32(1)), HaveField("Started", HaveValue(BeTrue())))))
			}).WithTimeout(timeout).WithPolling(250 * time.Millisecond).Should(Succeed())
			Expect(expectRunning(js, 1)).To(Equal(before))
			// The leader told the restarted agent the epoch it held, 1,
			// which is not deprecated: the one case where the agent reads
			// its Pod, to learn that its workers still run.
			Eventually(func() string { return agentLog(victim) }).WithTimeout(30*time.Second).
				Should(And(MatchRegexp(`"msg":"asked the leader for the epoch it holds","epoch":1,"readPod":true`),
					MatchRegexp(`"msg":"started","epoch":1,"resumed":true`)), "agent log of %s", victim.Name)
			// The restarted agent reported its epoch again; a controller that
			// took it for a new member would deprecate the epoch within a
			// reconcile.
			Consistently(func(g Gomega) {
				got := getJobSet(js)
				g.Expect(got.Status.Restarts).To(BeZero())
				g.Expect(got.Status.DeprecatedEpoch).To(BeZero())
				g.Expect(got.Status.SyncedEpoch).To(Equal(int32(1)))
			}).WithTimeout(5 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
			Expect(restarts.restarted()).To(ConsistOf(victim.Name+"/"+agentContainer+": 1 (was 0)"), "only the crashed agent restarted")
		})

		It("converges after the manager is stopped in the middle of an in-place restart", func() {
			js := workerJobSet("killed", ns.Name, nil)
			// The workers that did not fail take 5 s to stop, which holds
			// the restart that long: the manager stops within it.
			for i := range js.Spec.ReplicatedJobs {
				c := &js.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec.Containers[0]
				c.Env = append(c.Env, corev1.EnvVar{Name: "TERM_DELAY", Value: "5s"})
			}
			Expect(k8sClient.Create(ctx, js)).To(Succeed())
			before := expectRunning(js, 1)
			exitWorker(podsOf(js)[0], 1)
			Eventually(func() int32 { return getJobSet(js).Status.DeprecatedEpoch }).WithTimeout(timeout).Should(Equal(int32(1)))
			// The agents restart their Pods and report the new epoch while no
			// manager runs; the next one must finish what the last began.
			fw.StopManager()
			Expect(getJobSet(js).Status.SyncedEpoch).To(Equal(int32(1)), "the restart ended before the manager stopped: nothing left to finish")
			fw.StartManager(cfg)
			Expect(expectRunning(js, 2)).To(Equal(before))
			got := getJobSet(js)
			Expect(got.Status.InPlaceRestarts).To(Equal(int32(1)), "the restart was counted once")
			Expect(got.Status.Restarts).To(Equal(int32(1)))
		})

		It("a lost node: its Pod is replaced on another node and the others restart in place", func() {
			js := workerJobSet("lost", ns.Name, nil)
			antiAffinity(js, false)
			Expect(k8sClient.Create(ctx, js)).To(Succeed())
			before := expectRunning(js, 1)
			Expect(nodesOf(before)).To(HaveLen(nodes), "one Pod per node")
			victim := podsOf(js)[1]
			lost := victim.Spec.NodeName
			loseNode(lost)
			// The machine is gone for good, as a cloud's node controller says
			// by deleting its Node: the Pod garbage collector then fails and
			// removes the Pods bound to it, and the Job replaces them.
			Expect(clientset.CoreV1().Nodes().Delete(ctx, lost, metav1.DeleteOptions{})).To(Succeed())

			after := expectRunning(js, 2)
			Expect(after).NotTo(HaveKey(victim.Name), "the lost Pod is back")
			survivors := 0
			for name, id := range after {
				Expect(id.Node).NotTo(Equal(lost), "pod %s runs on the lost node", name)
				if old, ok := before[name]; ok {
					Expect(id).To(Equal(old), "pod %s restarted in place: same UID and IP", name)
					survivors++
				}
			}
			Expect(survivors).To(Equal(len(before)-1), "every Pod but the lost one restarted in place")
			got := getJobSet(js)
			Expect(got.Status.InPlaceRestarts).To(Equal(int32(1)))
			Expect(got.Status.Restarts).To(Equal(int32(1)))
		})

		It("falls back to Recreate when a node cannot restart its Pod within the in-place timeout, and says so", func() {
			suiteTimeout := inPlaceRestartTimeout
			restartManagerWith(20 * time.Second)
			DeferCleanup(restartManagerWith, suiteTimeout)

			js := workerJobSet("stuck", ns.Name, nil)
			antiAffinity(js, true)
			Expect(k8sClient.Create(ctx, js)).To(Succeed())
			before := expectRunning(js, 1)
			jobUIDs := map[string]types.UID{}
			var jobs batchv1.JobList
			Expect(k8sClient.List(ctx, &jobs, client.InNamespace(ns.Name))).To(Succeed())
			for _, j := range jobs.Items {
				jobUIDs[j.Name] = j.UID
			}
			pods := podsOf(js)
			// The kubelet of the second Pod's node stops: its agent sees the
			// epoch deprecated and exits, and nothing restarts it. In process
			// scope the agent would restart its workers without the kubelet:
			// it is stopped too, and nothing restarts it either.
			stuck := pods[1].Spec.NodeName
			loseNode(stuck)
			if scope == protocol.RestartScopeProcess {
				Expect(fw.Cluster.KillContainer(ctx, stuck, containerID(pods[1], agentContainer))).To(Succeed())
			}
			exitWorker(pods[0], 1)

			got := util.ExpectJobSetCondition(ctx, k8sClient, js, jobset.JobSetRestarting, "InPlaceRestartTimedOut", timeout)
			Expect(got.Status.InPlaceRestarts).To(Equal(int32(1)))
			Expect(got.Status.RestartsCountTowardsMax).To(Equal(int32(1)), "the fallback counted the restart twice")
			Eventually(func(g Gomega) {
				var events corev1.EventList
				g.Expect(k8sClient.List(ctx, &events, client.InNamespace(ns.Name))).To(Succeed())
				g.Expect(events.Items).To(ContainElement(And(
					HaveField("Reason", "InPlaceRestartTimedOut"), HaveField("InvolvedObject.Name", js.Name))))
			}).WithTimeout(timeout).Should(Succeed())

			// The node comes back: it lets its old Pod go, and the recreated
			// Jobs' Pods start there.
			startKubelet(stuck)
			after := expectRunning(js, 2)
			for name, id := range after {
				for oldName, old := range before {
					Expect(id.UID).NotTo(Equal(old.UID), "pod %s is %s, not recreated", name, oldName)
				}
			}
			Expect(k8sClient.List(ctx, &jobs, client.InNamespace(ns.Name))).To(Succeed())
			Expect(jobs.Items).To(HaveLen(len(jobUIDs)))
			for _, j := range jobs.Items {
				Expect(j.UID).NotTo(Equal(jobUIDs[j.Name]), "job %s not recreated", j.Name)
			}
			final := getJobSet(js)
			Expect(final.Status.InPlaceRestarts).To(Equal(int32(1)))
			Expect(final.Status.RestartsCountTowardsMax).To(Equal(int32(1)))
		})
	})
})
