package controller

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"time"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/test/wrappers"
)

// These specs play Kueue's side of its JobSet integration, as Kueue
// documents it (Kueue's controller needs a module this build cannot
// have): its webhook creates the JobSet suspended; admission writes each
// Pod set's node selectors, tolerations, labels and scheduling gates of the
// flavor it chose into the Pod templates and unsuspends, in one update;
// preemption suspends and restores the templates, in one update; the
// workload is later admitted again, elsewhere.
var _ = Describe("a JobSet queued by Kueue", func() {
	const queueLabel = "kueue.x-k8s.io/queue-name"
	var ns *corev1.Namespace
	BeforeEach(func() {
		ns = fw.NewNamespace(ctx, k8sClient)
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
	})

	// flavor is what Kueue writes into every Pod template when it admits.
	type flavor struct {
		nodeSelector map[string]string
		tolerations  []corev1.Toleration
		labels       map[string]string
		gates        []corev1.PodSchedulingGate
	}
	flavorA := flavor{
		nodeSelector: map[string]string{corev1.LabelHostname: "node-0"},
		tolerations:  []corev1.Toleration{{Key: "flavor-a", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		labels:       map[string]string{"kueue.x-k8s.io/podset": "w", "flavor": "a"},
	}
	flavorB := flavor{
		nodeSelector: map[string]string{corev1.LabelHostname: "node-1"},
		tolerations:  []corev1.Toleration{{Key: "flavor-b", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		labels:       map[string]string{"kueue.x-k8s.io/podset": "w", "flavor": "b"},
	}

	// update changes the JobSet as Kueue does: read, change, write, again
	// on a conflict.
	update := func(js *jobset.JobSet, change func(*jobset.JobSet)) {
		GinkgoHelper()
		util.UpdateJobSet(ctx, k8sClient, js, change)
	}
	admit := func(js *jobset.JobSet, f flavor) {
		GinkgoHelper()
		update(js, func(js *jobset.JobSet) {
			for i := range js.Spec.ReplicatedJobs {
				tpl := &js.Spec.ReplicatedJobs[i].Template.Spec.Template
				tpl.Spec.NodeSelector = f.nodeSelector
				tpl.Spec.Tolerations = append(tpl.Spec.Tolerations, f.tolerations...)
				tpl.Spec.SchedulingGates = f.gates
				if tpl.Labels == nil {
					tpl.Labels = map[string]string{}
				}
				for k, v := range f.labels {
					tpl.Labels[k] = v
				}
			}
			js.Spec.Suspend = ptr.To(false)
		})
	}
	preempt := func(js *jobset.JobSet, f flavor) {
		GinkgoHelper()
		update(js, func(js *jobset.JobSet) {
			js.Spec.Suspend = ptr.To(true)
			for i := range js.Spec.ReplicatedJobs {
				tpl := &js.Spec.ReplicatedJobs[i].Template.Spec.Template
				tpl.Spec.NodeSelector = nil
				tpl.Spec.Tolerations = slicesWithout(tpl.Spec.Tolerations, f.tolerations)
				tpl.Spec.SchedulingGates = nil
				for k := range f.labels {
					delete(tpl.Labels, k)
				}
			}
		})
	}
	// expectPodsOf waits for want Pods not being deleted, every one started
	// with the flavor's directives, and returns them.
	expectPodsOf := func(js *jobset.JobSet, want int, f flavor) []corev1.Pod {
		GinkgoHelper()
		var pods []corev1.Pod
		Eventually(func(g Gomega) {
			pods = livePods(g, js)
			g.Expect(pods).To(HaveLen(want))
			for _, p := range pods {
				g.Expect(p.Spec.NodeSelector).To(Equal(f.nodeSelector), "pod %s", p.Name)
				g.Expect(p.Spec.Tolerations).To(ContainElements(f.tolerations), "pod %s", p.Name)
				g.Expect(p.Spec.SchedulingGates).To(Equal(f.gates), "pod %s", p.Name)
				for k, v := range f.labels {
					g.Expect(p.Labels).To(HaveKeyWithValue(k, v), "pod %s", p.Name)
				}
			}
		}).WithTimeout(timeout).Should(Succeed())
		return pods
	}
	run := func(js *jobset.JobSet, pods []corev1.Pod, epoch string) {
		GinkgoHelper()
		for _, job := range []string{"kq-w-0", "kq-w-1"} {
			util.SetPodsRunning(ctx, k8sClient, js.Namespace, job, 2)
		}
		for i := range pods {
			util.SetEpoch(ctx, k8sClient, &pods[i], epoch)
		}
	}
	expectStatus := func(js *jobset.JobSet, synced, restarts int32) *jobset.JobSet {
		GinkgoHelper()
		var got *jobset.JobSet
		Eventually(func(g Gomega) {
			got = get(js)
			g.Expect(got.Status.SyncedEpoch).To(Equal(synced), "syncedEpoch")
			g.Expect(got.Status.Restarts).To(Equal(restarts), "restarts")
			g.Expect(got.Status.RestartsCountTowardsMax).To(Equal(restarts), "restartsCountTowardsMax")
			g.Expect(got.Status.TerminalState).To(BeEmpty())
		}).WithTimeout(timeout).Should(Succeed())
		return got
	}

	It("is admitted, preempted and admitted elsewhere without a restart counted, and still restarts in place after", func() {
		rj := wrappers.MakeReplicatedJob("w").Replicas(2).Parallelism(2).Obj()
		rj.Template.Spec.BackoffLimit = nil // set by the webhook for InPlaceRestart
		js := create(wrappers.MakeJobSet("kq", ns.Name).Label(queueLabel, "team-a").Suspend(true).ReplicatedJob(rj).
			FailurePolicy(&jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart, MaxRestarts: 1}).Obj())
		expectJobs(js, "0", "kq-w-0", "kq-w-1")
		jobUIDs := uids(js)
		Consistently(func(g Gomega) { g.Expect(livePods(g, js)).To(BeEmpty()) }).WithTimeout(shortWait).Should(Succeed(), "a queued JobSet runs no Pod")

		By("admission to flavor a: the Pods start with its directives and sync")
		admit(js, flavorA)
		pods := expectPodsOf(js, 4, flavorA)
		run(js, pods, "1")
		expectStatus(js, 1, 0)

		By("preemption: every Pod stops, no restart is counted, nothing fails")
		preempt(js, flavorA)
		expectCondition(js, jobset.JobSetSuspended, "True", "SuspendedJobs")
		Eventually(func(g Gomega) { g.Expect(livePods(g, js)).To(BeEmpty()) }).WithTimeout(timeout).Should(Succeed())
		got := expectStatus(js, 1, 0)
		Expect(got.Status.DeprecatedEpoch).To(Equal(int32(1)), "the preempted group's epoch is over")
		Expect(findCondition(got, jobset.JobSetRestarting)).To(BeNil())

		By("admission to flavor b: the Pods start with b's directives, a's are gone, and a fresh epoch syncs")
		admit(js, flavorB)
		pods = expectPodsOf(js, 4, flavorB)
		for _, p := range pods {
			Expect(p.Spec.Tolerations).NotTo(ContainElements(flavorA.tolerations), "pod %s", p.Name)
		}
		run(js, pods, "2")
		expectStatus(js, 2, 0)
		Expect(uids(js)).To(Equal(jobUIDs), "a preemption recreated a Job")

		By("a worker exits: every Pod restarts in place, one restart counted")
		podUIDs := map[types.UID]bool{}
		for _, p := range pods {
			podUIDs[p.UID] = true
		}
		util.ExitContainer(ctx, k8sClient, &pods[0], "worker", 1)
		got = expectCondition(js, jobset.JobSetRestarting, "True", "InPlaceRestart")
		Expect(got.Status.Restarts).To(Equal(int32(1)))
		Expect(got.Status.InPlaceRestarts).To(Equal(int32(1)))
		Expect(got.Status.DeprecatedEpoch).To(Equal(int32(2)))

		By("a preemption during the in-place restart ends it, without another restart")
		preempt(js, flavorB)
		expectCondition(js, jobset.JobSetRestarting, "False", "InPlaceRestartSuspended")
		Eventually(func(g Gomega) { g.Expect(livePods(g, js)).To(BeEmpty()) }).WithTimeout(timeout).Should(Succeed())
		expectStatus(js, 2, 1)

		By("admitted again: a fresh epoch syncs; maxRestarts 1 is used, and the JobSet still runs")
		admit(js, flavorA)
		pods = expectPodsOf(js, 4, flavorA)
		run(js, pods, "3")
		expectStatus(js, 3, 1)
		for _, p := range pods {
			Expect(podUIDs).NotTo(HaveKey(p.UID), "pod %s survived a preemption", p.Name)
		}
	})

	// Upstream JobSet's end-to-end case "JobSet is resumed — propagates
	// scheduling gates to Pods": Kueue's topology-aware scheduling adds a
	// gate in the update that resumes.
	It("starts its Pods with the scheduling gates added in the update that resumes it", func() {
		js := create(wrappers.MakeJobSet("kq", ns.Name).Label(queueLabel, "team-a").Suspend(true).
			ReplicatedJob(wrappers.MakeReplicatedJob("w").Replicas(2).Parallelism(2).Obj()).Obj())
		expectJobs(js, "0", "kq-w-0", "kq-w-1")
		gated := flavorA
		gated.gates = []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/topology"}}
		admit(js, gated)
		pods := expectPodsOf(js, 4, gated)
		Consistently(func(g Gomega) {
			for _, p := range livePods(g, js) {
				g.Expect(p.Spec.NodeName).To(BeEmpty(), "pod %s was scheduled through its gate", p.Name)
			}
		}).WithTimeout(shortWait).Should(Succeed())
		Expect(pods).To(HaveLen(4))
		for _, name := range []string{"kq-w-0", "kq-w-1"} {
			var job batchv1.Job
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: name}, &job)).To(Succeed())
			Expect(job.Spec.Template.Spec.SchedulingGates).To(Equal(gated.gates), "job %s", name)
		}
	})
})

// shortWait is how long a spec watches for something that must not happen.
const shortWait = 2 * time.Second

// livePods returns the JobSet's Pods not being deleted.
func livePods(g Gomega, js *jobset.JobSet) []corev1.Pod {
	var list corev1.PodList
	g.Expect(k8sClient.List(ctx, &list, client.InNamespace(js.Namespace), client.MatchingLabels{jobset.JobSetNameKey: js.Name})).To(Succeed())
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// slicesWithout returns ts without the tolerations in drop.
func slicesWithout(ts, drop []corev1.Toleration) []corev1.Toleration {
	var out []corev1.Toleration
	for _, t := range ts {
		keep := true
		for _, d := range drop {
			if t.MatchToleration(&d) {
				keep = false
			}
		}
		if keep {
			out = append(out, t)
		}
	}
	return out
}
