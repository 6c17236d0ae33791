package pytorch

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/docpage"
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
			first, second, found := strings.Cut(podLog(p), "inplace-supervisor: barrier of epoch 2 lifted")
			Expect(found).To(BeTrue(), "the supervisor of %s did not start the worker at epoch 2", p.Name)
			if i == 0 {
				firstRun = first
			}
			resumed = append(resumed, second)
		}
		expectResumedFrom(resumed, firstRun)
	})

	It("in-process, keeps every rank that did not fail in its process, starts the failed one anew, and training resumes from the checkpoint", func() {
		js := createManifest(ns.Name, example.InProcessManifest, nil)
		waitForCheckpoint(js)
		waitForStandbys(js)
		// Rank 0, which also serves the store the ranks meet at.
		before, _ := crashAfterCheckpoint(js, "touch /tmp/inplace-crash")

		got := util.ExpectJobSetCondition(ctx, k8sClient, js, jobset.JobSetCompleted, "AllJobsCompleted", timeout)
		Expect(got.Status.InPlaceRestarts).To(BeEquivalentTo(1), "one crash, one in-place restart")
		Expect(got.Status.Restarts).To(BeEquivalentTo(1), "one crash, one restart")
		Expect(podUIDs(js)).To(Equal(before), "every Pod kept its identity")
		byRank := inProcessRanks(js)
		for _, r := range byRank {
			if r.rank == 0 {
				Expect(r.pids[1]).NotTo(Equal(r.pids[0]), "rank 0 failed: it starts anew, as a process")
				Expect(r.supervisor).To(ContainSubstring("started the worker (pid "+r.pids[1]+", the standby)"), "rank 0's standby takes its place")
				Expect(r.second).To(ContainSubstring("rank 0 resumed from checkpoint"))
				continue
			}
			Expect(r.pids[1]).To(Equal(r.pids[0]), "rank %d did not fail: it runs on in its process", r.rank)
			Expect(r.supervisor).To(ContainSubstring("resumed the worker in its process"), "rank %d", r.rank)
		}
		expectResumedFrom(secondRuns(byRank), byRank[0].first)
		// The how-to page shows these logs: rank 1's, then rank 0's.
		expectPageShows("restart-in-process.md", "5. Apply it and fail a rank",
			containerLog(podOf(js, 0), "pytorch-1", false), containerLog(podOf(js, 0), "pytorch", false))
	})

	It("in-process, does not wait for a frozen rank past the deadline to park", func() {
		js := createManifest(ns.Name, example.InProcessManifest, nil)
		waitForCheckpoint(js)
		waitForStandbys(js)
		before := podUIDs(js)
		// Rank 3 freezes, as on a lost node: the other ranks' next
		// collective waits for it. Rank 1 then dies under its collective.
		frozen, killed := podOf(js, 1), podOf(js, 0)
		signalWorker(frozen, "pytorch-1", "STOP")
		killedAt := time.Now()
		signalWorker(killed, "pytorch-1", "KILL")

		got := util.ExpectJobSetCondition(ctx, k8sClient, js, jobset.JobSetCompleted, "AllJobsCompleted", timeout)
		Expect(got.Status.InPlaceRestarts).To(BeEquivalentTo(1), "one failure, one in-place restart")
		Expect(podUIDs(js)).To(Equal(before), "every Pod kept its identity")
		byRank := inProcessRanks(js)
		for _, r := range byRank {
			switch r.rank {
			case 1:
				Expect(r.pids[1]).NotTo(Equal(r.pids[0]), "rank 1 was killed: it starts anew")
			case 3:
				Expect(r.supervisor).To(ContainSubstring("did not park within 10s"), "the frozen rank's supervisor")
				Expect(r.pids[1]).NotTo(Equal(r.pids[0]), "the frozen rank is restarted as a process")
			default:
				Expect(r.pids[1]).To(Equal(r.pids[0]), "rank %d, waiting on the frozen one, runs on in its process", r.rank)
			}
		}
		// The deadline bounds the restart: the barrier of epoch 2 lifts
		// about 10 s after the failure, not after the process group's
		// timeout (60 s), nor never, as the frozen rank would have it.
		lifted := byRank[0].liftedAt
		Expect(lifted.Sub(killedAt)).To(BeNumerically("<", 25*time.Second), "the barrier of epoch 2 lifted %s after the failure", lifted.Sub(killedAt))
		expectResumedRun(secondRuns(byRank))
	})

	It("fails the JobSet without a restart when a rank exits with a fatal code", MustPassRepeatedly(2), func() {
		js := createExample(ns.Name, nil)
		// Local rank 1 exits 42. Its Pod's rank 0 then fails as their
		// collective breaks, or is ended by torchrun, which names only the
		// first rank it sees fail: torchrun.py must still exit 42. Written
		// whole: a rank that read an empty file would crash with code 1.
		_, firstRun := crashAfterCheckpoint(js, "echo 42 1 > /tmp/crash && mv /tmp/crash /tmp/inplace-crash")

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
	return createManifest(ns, example.Manifest, change)
}

// createManifest is createExample for one of examples/pytorch's
// manifests.
func createManifest(ns, manifest string, change func(*example.Example)) *jobset.JobSet {
	GinkgoHelper()
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	ex, err := example.LoadManifest(root, ns, manifest)
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
	waitForCheckpoint(js)
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

// waitForStandbys waits until the supervisor of every rank of the
// in-process example, whose Pods run, has its standby ready: in a run
// longer than a test's, every failure finds one.
func waitForStandbys(js *jobset.JobSet) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		for i := range nodes {
			p := podOf(js, i)
			for _, c := range p.Spec.Containers {
				g.Expect(containerLog(p, c.Name, false)).To(ContainSubstring("inplace-supervisor: standby ready"), "%s of Pod %d", c.Name, i)
			}
		}
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
}

// waitForCheckpoint waits until the first Pod logged a checkpoint after
// step 0.
func waitForCheckpoint(js *jobset.JobSet) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		pods := util.JobSetPods(ctx, k8sClient, js)
		g.Expect(pods).To(HaveLen(nodes))
		run := example.ReadRun(example.ParseLog(podLog(podOf(js, 0)), false))
		g.Expect(run.LastSaved()).To(BeNumerically(">", 0), "no checkpoint yet")
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
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
		logs = append(logs, podLog(podOf(js, i)))
	}
	expectResumedFrom(logs, firstRunLog)
}

// expectResumedRun checks the run after a restart, from each log of it:
// every rank resumed from one checkpoint after step 0, and training
// ended. It returns the run and the checkpoint's step.
func expectResumedRun(resumedLogs []string) (example.Run, int) {
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
	return second, step
}

// expectResumedFrom checks the run after the crash, from each node's log
// of it, and that it went on from the first run's checkpoint.
func expectResumedFrom(resumedLogs []string, firstRunLog string) {
	GinkgoHelper()
	second, step := expectResumedRun(resumedLogs)

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

// podLog is the log of the training container (rank 0's in-process).
func podLog(p corev1.Pod) string {
	GinkgoHelper()
	return containerLog(p, container, false)
}

func containerLog(p corev1.Pod, name string, timestamps bool) string {
	GinkgoHelper()
	data, err := clientset.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: name, Timestamps: timestamps}).DoRaw(ctx)
	if err != nil {
		return ""
	}
	return string(data)
}

// inProcessRank is what a rank's container logged in-process, over the
// first in-place restart.
type inProcessRank struct {
	rank int
	// first and second are the worker's log before and after the
	// barrier of epoch 2 lifted.
	first, second string
	// supervisor is what the supervisor logged.
	supervisor string
	// pids are the worker's processes at epochs 1 and 2.
	pids [2]string
	// liftedAt is when the supervisor saw the barrier of epoch 2 lift.
	liftedAt time.Time
}

var runsAt = regexp.MustCompile(`inplace_restart: rank (\d+) \(pid (\d+)\) runs at epoch ([12])$`)

// inProcessRanks reads every rank's container log of the in-process
// example, ordered by rank.
func inProcessRanks(js *jobset.JobSet) []inProcessRank {
	GinkgoHelper()
	out := make([]inProcessRank, ranks)
	for i := range nodes {
		p := podOf(js, i)
		for _, s := range p.Status.ContainerStatuses {
			Expect(s.RestartCount).To(BeZero(), "container %s of %s restarted", s.Name, p.Name)
		}
		// A container per local rank, in order.
		for local, c := range p.Spec.Containers {
			name := c.Name
			r := inProcessRank{rank: i*len(p.Spec.Containers) + local}
			first := true
			for _, l := range example.ParseLog(containerLog(p, name, true), true) {
				if strings.HasPrefix(l.Text, "inplace-supervisor: barrier of epoch 2 lifted") {
					first, r.liftedAt = false, l.Time
				}
				if strings.HasPrefix(l.Text, "inplace-supervisor: ") {
					r.supervisor += l.Text + "\n"
					continue
				}
				if m := runsAt.FindStringSubmatch(l.Text); m != nil {
					Expect(m[1]).To(Equal(strconv.Itoa(r.rank)), "container %s of %s", name, p.Name)
					r.pids[m[3][0]-'1'] = m[2]
				}
				if first {
					r.first += l.Text + "\n"
				} else {
					r.second += l.Text + "\n"
				}
			}
			Expect(r.liftedAt.IsZero()).To(BeFalse(), "the supervisor of %s in %s did not see the barrier of epoch 2 lift", name, p.Name)
			Expect(r.pids[0]).NotTo(BeEmpty(), "rank %d never ran at epoch 1", r.rank)
			Expect(r.pids[1]).NotTo(BeEmpty(), "rank %d never ran at epoch 2", r.rank)
			out[r.rank] = r
		}
	}
	return out
}

// numbers are what differs from one run to the next in a log line: pids,
// steps, durations.
var numbers = regexp.MustCompile(`[0-9]+(\.[0-9]+)?(ns|µs|ms|s)?\b`)

// expectPageShows checks that the text blocks of a section of a page
// under docs/how-to are the logs, in order: each line of the i-th block,
// its numbers aside, is a line of the i-th log, in the same order.
func expectPageShows(page, section string, logs ...string) {
	GinkgoHelper()
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(filepath.Join(root, "docs", "how-to", page))
	Expect(err).NotTo(HaveOccurred())
	p, err := docpage.Read(string(data))
	Expect(err).NotTo(HaveOccurred())
	var blocks []docpage.Block
	for _, b := range p.Blocks {
		if b.Info == "text" && p.Section(b.Line, 2).Text == section {
			blocks = append(blocks, b)
		}
	}
	Expect(blocks).To(HaveLen(len(logs)), "text blocks in %s, section %q", page, section)
	for i, b := range blocks {
		var got []string
		for l := range strings.Lines(logs[i]) {
			got = append(got, numbers.ReplaceAllString(strings.TrimSpace(l), "N"))
		}
		at := 0
		for want := range strings.Lines(b.Text) {
			want = numbers.ReplaceAllString(strings.TrimSpace(want), "N")
			found := slices.Index(got[at:], want)
			Expect(found).To(BeNumerically(">=", 0), "%s line %d: %q is not in the log, after line %d:\n%s", page, b.Line, want, at, logs[i])
			at += found + 1
		}
	}
}

func secondRuns(byRank []inProcessRank) []string {
	var out []string
	for _, r := range byRank {
		out = append(out, r.second)
	}
	return out
}

// signalWorker sends sig to the worker its supervisor last started in a
// container, with the image's shell: the supervisor is the container's
// first process and logs the worker's pid.
func signalWorker(p corev1.Pod, name, sig string) {
	GinkgoHelper()
	started := regexp.MustCompile(`started the worker \(pid (\d+)`).FindAllStringSubmatch(containerLog(p, name, false), -1)
	Expect(started).NotTo(BeEmpty(), "the supervisor of %s in %s started no worker", name, p.Name)
	pid := started[len(started)-1][1]
	bin, err := cluster.BinDir()
	Expect(err).NotTo(HaveOccurred())
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), "--kubeconfig", fw.Cluster.Kubeconfig,
		"exec", "-n", p.Namespace, p.Name, "-c", name, "--", "sh", "-c", "kill -"+sig+" "+pid).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "kubectl exec: %s", out)
}
