package pytorch

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/test/cluster"
	example "github.com/inplace-dev/inplace/test/pytorch"
	"github.com/inplace-dev/inplace/test/util"
)

const (
	container = example.Container
	ranks     = nodes * 2
	steps     = 150
	// timeout bounds each wait: a first start imports torch on 4 ranks
	// sharing 2 cores with the cluster.
	timeout = 4 * time.Minute
)

var _ = Describe("examples/pytorch on real kubelets", func() {
	var ns *corev1.Namespace
	BeforeEach(func() {
		ns = fw.NewNamespace(ctx, k8sClient)
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
		DeferCleanup(func() {
			if CurrentSpecReport().Failed() {
				util.DumpContainerLogs(ctx, clientset, ns.Name, 60)
			}
		})
	})

	It("restarts every rank in place, and training resumes from the checkpoint", func() {
		js := createExample(ns.Name, nil)
		before, firstRun := crashAfterCheckpoint(js, "touch /tmp/inplace-crash")

		got := util.ExpectJobSetCondition(ctx, k8sClient, js, jobset.JobSetCompleted, "AllJobsCompleted", timeout)
		Expect(got.Status.InPlaceRestarts).To(BeEquivalentTo(1), "one crash, one in-place restart")
		Expect(got.Status.Restarts).To(BeEquivalentTo(1), "one crash, one restart")
		Expect(podUIDs(js)).To(Equal(before), "every Pod kept its identity")
		expectResumed(js, firstRun())
	})

	It("in process scope, restarts every rank's processes in place, no container restarted, and training resumes from the checkpoint", func() {
		js := createExample(ns.Name, func(ex *example.Example) { util.SetRestartScope(ex.JobSet, protocol.RestartScopeProcess) })
		before, _ := crashAfterCheckpoint(js, "touch /tmp/inplace-crash")

		got := util.ExpectJobSetCondition(ctx, k8sClient, js, jobset.JobSetCompleted, "AllJobsCompleted", timeout)
		Expect(got.Status.InPlaceRestarts).To(BeEquivalentTo(1), "one crash, one in-place restart")
		Expect(got.Status.Restarts).To(BeEquivalentTo(1), "one crash, one restart")
		Expect(podUIDs(js)).To(Equal(before), "every Pod kept its identity")
		// The containers ran on: each log holds both runs, split where the
		// supervisor started the worker behind the new epoch's barrier.
		var firstRun string
		var resumed []string
		for i := range nodes {
			p := podOf(js, i)
			// The agents count the worker restarts to the controller, not
			// on their Pods.
			Expect(p.Annotations).NotTo(HaveKey(protocol.WorkerRestartsAnnotation), "pod %s: its agent wrote its Pod", p.Name)
			for _, s := range p.Status.ContainerStatuses {
				Expect(s.RestartCount).To(BeZero(), "container %s of %s restarted", s.Name, p.Name)
			}
			first, second, found := strings.Cut(podLog(p, false), "inplace-supervisor: barrier of epoch 2 lifted")
			Expect(found).To(BeTrue(), "the supervisor of %s did not start the worker at epoch 2", p.Name)
			if i == 0 {
				firstRun = first
			}
			resumed = append(resumed, second)
		}
		expectResumedFrom(resumed, firstRun)
	})

	It("fails the JobSet without a restart when a rank exits with a fatal code", MustPassRepeatedly(2), func() {
		js := createExample(ns.Name, nil)
		_, firstRun := crashAfterCheckpoint(js, "echo 42 > /tmp/inplace-crash")

		got := util.ExpectJobSetCondition(ctx, k8sClient, js, jobset.JobSetFailed, "FailJobSetFailurePolicyAction", timeout)
		// The ranks of the other Pod fail too as their peer vanishes, with
		// torchrun's exit code 1, reported by their kubelet maybe first:
		// the controller waits for the fatal exit (decide.FatalExitSettle).
		Expect(got.Status.InPlaceRestarts).To(BeZero(), "the fatal exit's echo started an in-place restart")
		Expect(got.Status.Restarts).To(BeZero(), "the fatal exit recreated the Pods")
		first := example.ReadRun(example.ParseLog(firstRun(), false))
		Expect(first.Crashed).To(BeTrue())
		Expect(first.CrashCode).To(Equal(42))
	})

	It("with Recreate, resumes from a shared volume in new Pods", func() {
		// Every real node is this host (example.UseRecreate).
		shared := GinkgoT().TempDir()
		Expect(os.Chmod(shared, 0o777)).To(Succeed())
		js := createExample(ns.Name, func(ex *example.Example) { ex.UseRecreate(shared) })
		before, firstRun := crashAfterCheckpoint(js, "touch /tmp/inplace-crash")

		got := util.ExpectJobSetCondition(ctx, k8sClient, js, jobset.JobSetCompleted, "AllJobsCompleted", timeout)
		Expect(got.Status.Restarts).To(BeEquivalentTo(1), "one crash, one recreation")
		Expect(got.Status.InPlaceRestarts).To(BeZero())
		after := podUIDs(js)
		for name, uid := range after {
			Expect(before[name]).NotTo(Equal(uid), "pod %s was not recreated", name)
		}
		expectResumed(js, firstRun())
	})
})

// createExample creates examples/pytorch/jobset.yaml in ns, edited by
// change, with a shorter run: 150 steps, a checkpoint every 20.
func createExample(ns string, change func(*example.Example)) *jobset.JobSet {
	GinkgoHelper()
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	ex, err := example.Load(root, ns)
	Expect(err).NotTo(HaveOccurred())
	Expect(ex.Nodes()).To(Equal(nodes))
	ex.SetRun(steps, 20)
	if change != nil {
		change(ex)
	}
	Expect(k8sClient.Create(ctx, ex.ServiceAccount)).To(Succeed())
	Expect(k8sClient.Create(ctx, ex.JobSet)).To(Succeed())
	return ex.JobSet
}

// podOf is the JobSet's Pod of completion index i.
func podOf(js *jobset.JobSet, i int) corev1.Pod {
	GinkgoHelper()
	name := (&example.Example{JobSet: js}).PodHostname(i)
	for _, p := range util.JobSetPods(ctx, k8sClient, js) {
		if p.Spec.Hostname == name && p.DeletionTimestamp == nil {
			return p
		}
	}
	Fail("no Pod with hostname " + name)
	return corev1.Pod{}
}

// crashAfterCheckpoint waits until the first Pod logged a checkpoint after
// step 0, then runs script in its container, as a person would with
// kubectl exec. It returns the Pods' UIDs before the crash, and the log of
// that container's run, whole once the container ended.
func crashAfterCheckpoint(js *jobset.JobSet, script string) (uids map[string]string, firstRun func() string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		pods := util.JobSetPods(ctx, k8sClient, js)
		g.Expect(pods).To(HaveLen(nodes))
		run := example.ReadRun(example.ParseLog(podLog(podOf(js, 0), false), false))
		g.Expect(run.LastSaved()).To(BeNumerically(">", 0), "no checkpoint yet")
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
	uids = podUIDs(js)
	pod := podOf(js, 0)
	follow := example.FollowLog(ctx, clientset, pod, false)
	firstRun = func() string {
		GinkgoHelper()
		log, ended := follow(timeout)
		Expect(ended).To(BeTrue(), "the log of %s's first run did not end", pod.Name)
		return log
	}
	bin, err := cluster.BinDir()
	Expect(err).NotTo(HaveOccurred())
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), "--kubeconfig", fw.Cluster.Kubeconfig,
		"exec", "-n", pod.Namespace, pod.Name, "-c", container, "--", "sh", "-c", script).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "kubectl exec: %s", out)
	return uids, firstRun
}

func podUIDs(js *jobset.JobSet) map[string]string {
	GinkgoHelper()
	out := map[string]string{}
	for _, p := range util.JobSetPods(ctx, k8sClient, js) {
		if p.DeletionTimestamp == nil {
			out[p.Spec.Hostname] = string(p.UID)
		}
	}
	Expect(out).To(HaveLen(nodes))
	return out
}

// expectResumed checks the logs of the run after the crash: every rank
// resumed from the same checkpoint, after step 0, the loss went on from
// where it was rather than from the untrained model's, and training ended.
func expectResumed(js *jobset.JobSet, firstRunLog string) {
	GinkgoHelper()
	var logs []string
	for i := range nodes {
		logs = append(logs, podLog(podOf(js, i), false))
	}
	expectResumedFrom(logs, firstRunLog)
}

// expectResumedFrom checks the run after the crash, from each node's log
// of it.
func expectResumedFrom(resumedLogs []string, firstRunLog string) {
	GinkgoHelper()
	var logs [][]example.Line
	for _, l := range resumedLogs {
		logs = append(logs, example.ParseLog(l, false))
	}
	second := example.ReadRun(logs...)
	step, err := second.ResumedStep(ranks)
	Expect(err).NotTo(HaveOccurred())
	Expect(step).To(BeNumerically(">", 0))
	Expect(second.Done).To(BeTrue(), "training did not finish after resuming")

	first := example.ReadRun(example.ParseLog(firstRunLog, false))
	Expect(first.Crashed).To(BeTrue(), "the first run did not crash")
	Expect(first.CrashCode).To(Equal(1))
	Expect(first.Loss).To(HaveKey(1))
	Expect(second.Loss).To(HaveKey(step + 1))
	initial, after := first.Loss[1], second.Loss[step+1]
	Expect(after).To(BeNumerically("<", initial/2), "the loss after resuming (%v) is not below half the untrained model's (%v)", after, initial)
	// The data of a step is the same in every run: where the first run
	// got past the checkpoint, the resumed run repeats its loss.
	if same, ok := first.Loss[step+1]; ok {
		Expect(after).To(BeNumerically("~", same, same*0.05), "step %d: loss %v after resuming, %v in the first run", step+1, after, same)
	} else {
		Expect(first.Loss).To(HaveKey(step))
		before := first.Loss[step]
		Expect(after).To(And(BeNumerically(">", before/2), BeNumerically("<", before*2)),
			"the loss after resuming (%v) is not that of the checkpoint's step (%v)", after, before)
	}
}

func podLog(p corev1.Pod, previous bool) string {
	GinkgoHelper()
	data, err := clientset.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: container, Previous: previous}).DoRaw(ctx)
	if err != nil {
		return ""
	}
	return string(data)
}
