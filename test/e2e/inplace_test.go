package e2e

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
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
	inplacectl "github.com/inplace-dev/inplace/cmd/inplacectl/app"
	"github.com/inplace-dev/inplace/test/framework"
	"github.com/inplace-dev/inplace/test/simnode"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/test/wrappers"
)

const timeout = 60 * time.Second

func loadStory1WithoutAgent(namespace string) *jobset.JobSet {
	GinkgoHelper()
	js := util.LoadSpec("inplace-story1.yaml", namespace)
	delete(js.Annotations, jobset.ExclusiveKey)
	for i := range js.Spec.ReplicatedJobs {
		pod := &js.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		pod.InitContainers = nil
		pod.Resources = nil
	}
	return js
}

func podsOf(js *jobset.JobSet) []corev1.Pod { return util.JobSetPods(ctx, k8sClient, js) }

// expectRunning waits until every expected Pod runs its workers at the
// synced epoch.
func expectRunning(js *jobset.JobSet, want int, epoch int32) map[string]types.UID {
	GinkgoHelper()
	return expectRunningReported(js, want, epoch, false)
}

// expectRunningAfterLeaderAway is expectRunning after the controller's
// leader was away while epoch began: an agent that could not reach it
// for FallbackAfter reported on its Pod meanwhile, as designed, so its
// Pod may carry the epoch it reported.
func expectRunningAfterLeaderAway(js *jobset.JobSet, want int, epoch int32) map[string]types.UID {
	GinkgoHelper()
	return expectRunningReported(js, want, epoch, true)
}

func expectRunningReported(js *jobset.JobSet, want int, epoch int32, podFallback bool) map[string]types.UID {
	GinkgoHelper()
	uids := map[string]types.UID{}
	Eventually(func(g Gomega) {
		var got jobset.JobSet
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(Succeed())
		g.Expect(got.Status.SyncedEpoch).To(Equal(epoch), "syncedEpoch")
		// The agents report their epochs to the controller, not on their
		// Pods: the controller syncs only once every Pod reported it.
		g.Expect(got.Status.SyncedPods).To(Equal(int32(want)), "syncedPods")
		pods := podsOf(js)
		g.Expect(pods).To(HaveLen(want))
		started := workersStarted(js.Namespace, epoch)
		for _, p := range pods {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
			switch reported, onPod := p.Annotations[jobset.EpochKey]; {
			case js.Annotations[protocol.AgentReportsAnnotation] == protocol.AgentReportsPod:
				g.Expect(p.Annotations).To(HaveKeyWithValue(jobset.EpochKey, itoa(epoch)), "pod %s", p.Name)
			case podFallback && onPod:
				// The leader was away from the last epoch's end into this
				// one: the agent's last report on its Pod is of either.
				g.Expect(reported).To(BeElementOf(itoa(epoch-1), itoa(epoch)), "pod %s: the epoch its agent reported on it", p.Name)
			default:
				g.Expect(p.Annotations).NotTo(HaveKey(jobset.EpochKey), "pod %s: its agent wrote its Pod", p.Name)
			}
			for _, cs := range p.Status.ContainerStatuses {
				g.Expect(cs.State.Running).NotTo(BeNil(), "container %s of pod %s", cs.Name, p.Name)
			}
			// A running container is not yet running workers: in process
			// scope its supervisor starts them once its barrier answers.
			g.Expect(started).To(HaveKey(p.Name), "the workers of pod %s at epoch %d", p.Name, epoch)
			uids[p.Name] = p.UID
		}
	}).WithTimeout(timeout).WithPolling(200 * time.Millisecond).Should(Succeed())
	return uids
}

// workersStarted are the Pods of namespace whose nodes recorded their
// workers' start at epoch.
func workersStarted(namespace string, epoch int32) map[string]bool {
	out := map[string]bool{}
	for _, e := range recorder.Events(namespace) {
		if e.Kind == simnode.WorkersStarted && e.Epoch == epoch {
			out[e.Pod] = true
		}
	}
	return out
}

var _ = Describe("in-place restart", func() {
	var ns *corev1.Namespace
	BeforeEach(func() {
		ns = fw.NewNamespace(ctx, k8sClient)
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
	})

	It("Story 1: one worker exits, every Pod restarts in place and the epoch advances by one", func() {
		js := loadStory1WithoutAgent(ns.Name)
		Expect(k8sClient.Create(ctx, js)).To(Succeed())
		before := expectRunning(js, 8, 1)
		restartsBefore := framework.MetricValue(fw.Metrics(), "inplace_jobset_restarts_total", "kind", "in_place")
		durationsBefore := framework.MetricValue(fw.Metrics(), "inplace_inplace_restart_duration_seconds", "", "")

		victim := podsOf(js)[3]
		patch := client.MergeFrom(victim.DeepCopy())
		victim.Annotations[simnode.ExitCodeAnnotation] = "1"
		Expect(k8sClient.Patch(ctx, &victim, patch)).To(Succeed())

		after := expectRunning(js, 8, 2)
		Expect(after).To(Equal(before), "a Pod was recreated instead of restarted in place")
		pods := names(podsOf(js))
		expectBarrierHeld(ns.Name, pods, 1)
		expectBarrierHeld(ns.Name, pods, 2)
		Expect(framework.MetricValue(fw.Metrics(), "inplace_jobset_restarts_total", "kind", "in_place") - restartsBefore).To(Equal(1.0))
		Expect(framework.MetricValue(fw.Metrics(), "inplace_inplace_restart_duration_seconds", "", "")-durationsBefore).To(Equal(1.0), "in-place restart durations observed")
		Expect(framework.MetricValue(fw.Metrics(), "inplace_jobset_epoch", "jobset", js.Name, "epoch", "synced")).To(Equal(2.0))
		var got jobset.JobSet
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(Succeed())
		Expect(got.Status.Restarts).To(Equal(int32(1)))
		Expect(got.Status.InPlaceRestarts).To(Equal(int32(1)))
		for _, p := range podsOf(js) {
			for _, cs := range p.Status.ContainerStatuses {
				Expect(cs.RestartCount).To(Equal(int32(1)), "container %s of pod %s restarted once", cs.Name, p.Name)
			}
		}
	})

	It("Story 1 in process scope on simulated nodes: the supervisors restart the workers, no container restarts", func() {
		js := util.SetRestartScope(loadStory1WithoutAgent(ns.Name), protocol.RestartScopeProcess)
		for i := range js.Spec.ReplicatedJobs {
			js.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec.Containers[0].Command = []string{"train"}
		}
		Expect(k8sClient.Create(ctx, js)).To(Succeed())
		before := expectRunning(js, 8, 1)

		victim := podsOf(js)[3]
		patch := client.MergeFrom(victim.DeepCopy())
		victim.Annotations[simnode.ExitCodeAnnotation] = "1"
		Expect(k8sClient.Patch(ctx, &victim, patch)).To(Succeed())

		Expect(expectRunning(js, 8, 2)).To(Equal(before), "a Pod was recreated instead of restarted in place")
		pods := names(podsOf(js))
		expectBarrierHeld(ns.Name, pods, 2)
		got := getJobSet(js)
		Expect(got.Status.Restarts).To(Equal(int32(1)))
		Expect(got.Status.InPlaceRestarts).To(Equal(int32(1)))
		Eventually(func(g Gomega) {
			for _, p := range podsOf(js) {
				// The agents report the count to the controller, not on
				// their Pods.
				g.Expect(p.Annotations).NotTo(HaveKey(protocol.WorkerRestartsAnnotation), "pod %s", p.Name)
				for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
					g.Expect(cs.RestartCount).To(BeZero(), "container %s of pod %s restarted", cs.Name, p.Name)
				}
			}
		}).WithTimeout(timeout).Should(Succeed())
	})
})

func itoa(i int32) string { return strconv.Itoa(int(i)) }

func names(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// expectBarrierHeld checks, from what the simulated nodes recorded, that
// at the epoch every one of pods started its workers, and no worker started
// before the agent of every one of pods had begun reporting that epoch: the
// barrier held until the whole group was at the new epoch. Only the group's
// Pods count: a deleted Pod's node may restart it in place once more before
// it learns of the deletion, as a kubelet may, and that Pod's agent then
// reports the new epoch too, on a Pod no longer in the group.
func expectBarrierHeld(namespace string, pods []string, epoch int32) {
	GinkgoHelper()
	events := recorder.Events(namespace)
	reported := map[string]time.Time{}
	started := map[string]time.Time{}
	for _, e := range events {
		if e.Epoch != epoch || !slices.Contains(pods, e.Pod) {
			continue
		}
		switch e.Kind {
		case simnode.EpochReported:
			if _, seen := reported[e.Pod]; !seen {
				reported[e.Pod] = e.Time
			}
		case simnode.WorkersStarted:
			if _, seen := started[e.Pod]; !seen {
				started[e.Pod] = e.Time
			}
		}
	}
	record := func(what string) func() string {
		return func() string { return fmt.Sprintf("%s; what the nodes recorded:\n%s", what, describeEvents(events)) }
	}
	for _, pod := range pods {
		Expect(reported).To(HaveKey(pod), record(fmt.Sprintf("the agent of %s never reported epoch %d", pod, epoch)))
		Expect(started).To(HaveKey(pod), record(fmt.Sprintf("the workers of %s never started at epoch %d", pod, epoch)))
	}
	var lastReport time.Time
	for _, t := range reported {
		if t.After(lastReport) {
			lastReport = t
		}
	}
	for pod, t := range started {
		Expect(t.After(lastReport)).To(BeTrue(), record(fmt.Sprintf(
			"the workers of %s started at epoch %d %v before the last agent reported it", pod, epoch, lastReport.Sub(t))))
	}
}

// describeEvents lists recorded events one per line, timed from the first,
// for a failure message.
func describeEvents(events []simnode.Event) string {
	var b strings.Builder
	for _, e := range events {
		fmt.Fprintf(&b, "%8.3fs %-14s %s epoch=%d exit=%d\n", e.Time.Sub(events[0].Time).Seconds(), e.Kind, e.Pod, e.Epoch, e.ExitCode)
	}
	return b.String()
}

// expectBarriersInOrder checks that at the epoch no barrier of a replicated
// job lifted before the workers of every earlier one had started.
func expectBarriersInOrder(namespace string, epoch int32, order ...string) {
	GinkgoHelper()
	lastStart := map[string]time.Time{}
	firstLift := map[string]time.Time{}
	for _, e := range recorder.Events(namespace) {
		if e.Epoch != epoch {
			continue
		}
		switch e.Kind {
		case simnode.WorkersStarted:
			if e.Time.After(lastStart[e.ReplicatedJob]) {
				lastStart[e.ReplicatedJob] = e.Time
			}
		case simnode.BarrierLifted:
			if t, seen := firstLift[e.ReplicatedJob]; !seen || e.Time.Before(t) {
				firstLift[e.ReplicatedJob] = e.Time
			}
		}
	}
	for i := 1; i < len(order); i++ {
		prev, next := order[i-1], order[i]
		Expect(lastStart).To(HaveKey(prev), "no workers of %s started at epoch %d", prev, epoch)
		Expect(firstLift).To(HaveKey(next), "no barrier of %s lifted at epoch %d", next, epoch)
		Expect(firstLift[next].After(lastStart[prev])).To(BeTrue(),
			"a barrier of %s lifted at epoch %d before every worker of %s started", next, epoch, prev)
	}
}

func annotate(pod corev1.Pod, key, value string) {
	GinkgoHelper()
	patch := client.MergeFrom(pod.DeepCopy())
	metav1.SetMetaDataAnnotation(&pod.ObjectMeta, key, value)
	Expect(k8sClient.Patch(ctx, &pod, patch)).To(Succeed())
}

func getJobSet(js *jobset.JobSet) *jobset.JobSet { return util.GetJobSet(ctx, k8sClient, js) }

func expectCondition(js *jobset.JobSet, t jobset.JobSetConditionType, reason string) *jobset.JobSet {
	GinkgoHelper()
	return util.ExpectJobSetCondition(ctx, k8sClient, js, t, reason, timeout)
}

// crashAgent makes the agent of pod crash, alone, and waits until the node
// restarted it.
func crashAgent(pod corev1.Pod) {
	GinkgoHelper()
	annotate(pod, simnode.CrashAnnotation, "agent")
	Eventually(func(g Gomega) {
		var p corev1.Pod
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(&pod), &p)).To(Succeed())
		g.Expect(p.Status.InitContainerStatuses).To(ContainElement(And(HaveField("Name", "inplace-agent"), HaveField("RestartCount", int32(1)))))
	}).WithTimeout(timeout).Should(Succeed())
}

// expectOnePodRunning waits until the JobSet's one Pod runs.
func expectOnePodRunning(js *jobset.JobSet) corev1.Pod {
	GinkgoHelper()
	var pod corev1.Pod
	Eventually(func(g Gomega) {
		pods := podsOf(js)
		g.Expect(pods).To(HaveLen(1))
		g.Expect(pods[0].Status.Phase).To(Equal(corev1.PodRunning))
		pod = pods[0]
	}).WithTimeout(timeout).Should(Succeed())
	return pod
}

func smallInPlace(name, namespace string, maxRestarts int32) *jobset.JobSet {
	rj := wrappers.MakeReplicatedJob("w").Replicas(2).Parallelism(2).Obj()
	rj.Template.Spec.BackoffLimit = nil
	return wrappers.MakeJobSet(name, namespace).ReplicatedJob(rj).
		FailurePolicy(&jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart, MaxRestarts: maxRestarts}).Obj()
}

var _ = Describe("in-place restart, failure cases", func() {
	var ns *corev1.Namespace
	BeforeEach(func() {
		ns = fw.NewNamespace(ctx, k8sClient)
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
	})

	It("Story 2: a fatal exit code fails the JobSet without a restart; another code restarts in place", func() {
		js := *util.LoadSpec("inplace-story2.yaml", ns.Name)
		delete(js.Annotations, jobset.ExclusiveKey)
		for i := range js.Spec.ReplicatedJobs {
			pod := &js.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
			pod.InitContainers, pod.Resources = nil, nil
			// Without container rules: the webhook derives them from the podFailurePolicy.
			pod.Containers[0].RestartPolicy, pod.Containers[0].RestartPolicyRules = nil, nil
		}
		Expect(k8sClient.Create(ctx, &js)).To(Succeed())
		expectRunning(&js, 8, 1)

		annotate(podsOf(&js)[0], simnode.ExitCodeAnnotation, "7")
		expectRunning(&js, 8, 2)
		Expect(getJobSet(&js).Status.InPlaceRestarts).To(Equal(int32(1)))

		annotate(podsOf(&js)[5], simnode.ExitCodeAnnotation, "3")
		got := expectCondition(&js, jobset.JobSetFailed, "FailJobSetFailurePolicyAction")
		Expect(got.Status.InPlaceRestarts).To(Equal(int32(1)), "the fatal exit started an in-place restart")
		Expect(got.Status.Restarts).To(Equal(int32(1)))
	})

	It("an agent that crashes alone resumes its epoch: no group restart", func() {
		js := smallInPlace("crash", ns.Name, 3)
		Expect(k8sClient.Create(ctx, js)).To(Succeed())
		before := expectRunning(js, 4, 1)
		crashAgent(podsOf(js)[1])
		Expect(expectRunning(js, 4, 1)).To(Equal(before))
		Consistently(func(g Gomega) {
			got := getJobSet(js)
			g.Expect(got.Status.Restarts).To(BeZero())
			g.Expect(got.Status.DeprecatedEpoch).To(BeZero())
		}).WithTimeout(3 * time.Second).Should(Succeed())
	})

	It("allows exactly maxRestarts in-place restarts, then fails with ReachedMaxRestarts", func() {
		js := smallInPlace("max", ns.Name, 2)
		Expect(k8sClient.Create(ctx, js)).To(Succeed())
		before := expectRunning(js, 4, 1)
		for epoch := int32(2); epoch <= 3; epoch++ {
			annotate(podsOf(js)[0], simnode.ExitCodeAnnotation, "1")
			Expect(expectRunning(js, 4, epoch)).To(Equal(before))
		}
		annotate(podsOf(js)[2], simnode.ExitCodeAnnotation, "1")
		got := expectCondition(js, jobset.JobSetFailed, "ReachedMaxRestarts")
		Expect(got.Status.InPlaceRestarts).To(Equal(int32(2)))
		Expect(got.Status.RestartsCountTowardsMax).To(Equal(int32(2)))
	})

	It("a deleted Pod is replaced, joins, and the others restart in place", func() {
		js := smallInPlace("deleted", ns.Name, 3)
		Expect(k8sClient.Create(ctx, js)).To(Succeed())
		before := expectRunning(js, 4, 1)
		victim := podsOf(js)[2]
		Expect(k8sClient.Delete(ctx, &victim)).To(Succeed())
		after := expectRunning(js, 4, 2)
		replaced := 0
		for name, uid := range after {
			if before[name] != uid {
				replaced++
			}
		}
		Expect(replaced).To(Equal(1), "exactly the deleted Pod is new: before %v after %v", before, after)
		expectBarrierHeld(ns.Name, names(podsOf(js)), 2)
	})
})

var _ = Describe("in-place restart, more cases", func() {
	var ns *corev1.Namespace
	BeforeEach(func() {
		ns = fw.NewNamespace(ctx, k8sClient)
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
	})

	It("InOrder: every Job starts at once and the barriers open in order, also after a restart", func() {
		driver := wrappers.MakeReplicatedJob("driver").Obj()
		driver.Template.Spec.BackoffLimit = nil
		workers := wrappers.MakeReplicatedJob("workers").Parallelism(2).Obj()
		workers.Template.Spec.BackoffLimit = nil
		js := wrappers.MakeJobSet("ordered", ns.Name).ReplicatedJob(driver).ReplicatedJob(workers).
			StartupPolicy(jobset.InOrder).
			FailurePolicy(&jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart, MaxRestarts: 2}).Obj()
		Expect(k8sClient.Create(ctx, js)).To(Succeed())
		before := expectRunning(js, 3, 1)
		expectCondition(js, jobset.JobSetStartupPolicyCompleted, "InOrderStartupPolicyCompleted")
		var cm corev1.ConfigMap
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: protocol.BroadcastName("ordered")}, &cm)).To(Succeed())
		Expect(cm.Data).To(HaveKeyWithValue(protocol.KeyOpenReplicatedJobs, "driver,workers"))

		annotate(podsOf(js)[0], simnode.ExitCodeAnnotation, "1")
		Expect(expectRunning(js, 3, 2)).To(Equal(before))
		for epoch := int32(1); epoch <= 2; epoch++ {
			expectBarrierHeld(ns.Name, names(podsOf(js)), epoch)
			expectBarriersInOrder(ns.Name, epoch, "driver", "workers")
		}

		// inplacectl status shows it from the cluster.
		var out, errOut bytes.Buffer
		code := inplacectl.Run(ctx, []string{"status", js.Name, "-n", ns.Name, "--kubeconfig", framework.WriteKubeconfig(cfg)}, &out, &errOut)
		Expect(code).To(BeZero(), errOut.String())
		Expect(out.String()).To(And(
			ContainSubstring("epochs   synced 2  deprecated 1\n"),
			MatchRegexp(`driver\s+1\s+1\s+1\s+lifted`),
			MatchRegexp(`workers\s+2\s+2\s+2\s+lifted`),
			ContainSubstring("failure seen, epoch deprecated"),
			ContainSubstring("every Pod at the new epoch: barriers lifted"),
		), out.String())
	})

	It("a lost node: its Pod is replaced elsewhere and the others restart in place", func() {
		js := smallInPlace("lost", ns.Name, 3)
		Expect(k8sClient.Create(ctx, js)).To(Succeed())
		before := expectRunning(js, 4, 1)
		victim := podsOf(js)[1]
		node := &corev1.Node{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: victim.Spec.NodeName}, node)).To(Succeed())
		Expect(k8sClient.Delete(ctx, node)).To(Succeed())
		after := expectRunning(js, 4, 2)
		Expect(after).NotTo(HaveKey(victim.Name))
		for name, uid := range after {
			if name != victim.Name && before[name] != "" {
				Expect(uid).To(Equal(before[name]), "pod %s was recreated", name)
			}
		}
		for _, p := range podsOf(js) {
			Expect(p.Spec.NodeName).NotTo(Equal(victim.Spec.NodeName))
		}
	})

	It("a Job failure runs its rule with Recreate semantics: RestartJobSetAndIgnoreMaxRestarts recreates without counting", func() {
		js := smallInPlace("jobfail", ns.Name, 0)
		js.Spec.FailurePolicy.Rules = []jobset.FailurePolicyRule{{Name: "free", Action: jobset.RestartJobSetAndIgnoreMaxRestarts, OnJobFailureReasons: []string{"PodFailurePolicy"}}}
		js.Spec.ReplicatedJobs[0].Template.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
			Action:      batchv1.PodFailurePolicyActionFailJob,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{5}},
		}}}
		Expect(k8sClient.Create(ctx, js)).To(Succeed())
		before := expectRunning(js, 4, 1)
		annotate(podsOf(js)[0], simnode.ExitCodeAnnotation, "5")
		Eventually(func(g Gomega) {
			got := getJobSet(js)
			g.Expect(got.Status.Restarts).To(Equal(int32(1)))
		}).WithTimeout(timeout).Should(Succeed())
		after := expectRunning(js, 4, 2)
		for name := range after {
			Expect(before).NotTo(HaveKey(name), "pod %s survived a recreation", name)
		}
		got := getJobSet(js)
		Expect(got.Status.RestartsCountTowardsMax).To(BeZero())
		Expect(got.Status.InPlaceRestarts).To(BeZero())
		Expect(got.Status.TerminalState).To(BeEmpty())
	})

	It("converges after the manager is killed in the middle of an in-place restart", func() {
		js := smallInPlace("killed", ns.Name, 3)
		Expect(k8sClient.Create(ctx, js)).To(Succeed())
		before := expectRunning(js, 4, 1)
		annotate(podsOf(js)[0], simnode.ExitCodeAnnotation, "1")
		Eventually(func() int32 { return getJobSet(js).Status.DeprecatedEpoch }).WithTimeout(timeout).Should(Equal(int32(1)))
		fw.StopManager()
		fw.StartManager(cfg)
		Expect(expectRunningAfterLeaderAway(js, 4, 2)).To(Equal(before))
		got := getJobSet(js)
		Expect(got.Status.InPlaceRestarts).To(Equal(int32(1)), "the restart was counted once")
	})
})

var _ = Describe("in-place restart that cannot converge", func() {
	It("falls back to Recreate after the timeout and says so", func() {
		ns := fw.NewNamespace(ctx, k8sClient)
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
		var nodes corev1.NodeList
		Expect(k8sClient.List(ctx, &nodes, client.MatchingLabels{simnode.NodeLabel: "true"})).To(Succeed())
		Expect(len(nodes.Items)).To(BeNumerically(">=", 4))
		var four []string
		for _, n := range nodes.Items[:4] {
			four = append(four, n.Name)
		}
		// One worker per node, on exactly four nodes: once one of them is
		// lost, its replacement cannot be scheduled and the restart hangs.
		js := smallInPlace("stuck", ns.Name, 3)
		pod := &js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
		pod.Affinity = &corev1.Affinity{
			NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: four,
				}}}},
			}},
			PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{jobset.JobSetNameKey: "stuck"}},
				TopologyKey:   corev1.LabelHostname,
			}}},
		}
		Expect(k8sClient.Create(ctx, js)).To(Succeed())
		expectRunning(js, 4, 1)
		jobUIDs := map[string]types.UID{}
		var jobs batchv1.JobList
		Expect(k8sClient.List(ctx, &jobs, client.InNamespace(ns.Name))).To(Succeed())
		for _, j := range jobs.Items {
			jobUIDs[j.Name] = j.UID
		}

		victim := podsOf(js)[0]
		node := &corev1.Node{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: victim.Spec.NodeName}, node)).To(Succeed())
		Expect(k8sClient.Delete(ctx, node)).To(Succeed())

		expectCondition(js, jobset.JobSetRestarting, "InPlaceRestartTimedOut")
		Eventually(func(g Gomega) {
			var events corev1.EventList
			g.Expect(k8sClient.List(ctx, &events, client.InNamespace(ns.Name))).To(Succeed())
			g.Expect(events.Items).To(ContainElement(HaveField("Reason", "InPlaceRestartTimedOut")))
		}).WithTimeout(timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			var now batchv1.JobList
			g.Expect(k8sClient.List(ctx, &now, client.InNamespace(ns.Name))).To(Succeed())
			g.Expect(now.Items).NotTo(BeEmpty())
			for _, j := range now.Items {
				g.Expect(j.UID).NotTo(Equal(jobUIDs[j.Name]), "job %s not recreated", j.Name)
				g.Expect(j.Labels).To(HaveKeyWithValue(jobset.RestartsKey, "1"))
			}
		}).WithTimeout(timeout).Should(Succeed())
		got := getJobSet(js)
		Expect(got.Status.InPlaceRestarts).To(Equal(int32(1)))
		Expect(got.Status.RestartsCountTowardsMax).To(Equal(int32(1)), "the fallback counted the restart twice")
	})
})
