package pytorch

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/util"
)

const (
	container = "pytorch"
	ranks     = nodes * 2
	// timeout bounds each wait: a first start imports torch on 4 ranks
	// sharing 2 cores with the cluster.
	timeout = 4 * time.Minute
)

var (
	stepLine    = regexp.MustCompile(`(?m)^step (\d+) loss ([0-9.]+)$`)
	savedLine   = regexp.MustCompile(`(?m)^saved checkpoint at step (\d+)$`)
	resumedLine = regexp.MustCompile(`(?m)^rank (\d+) resumed from checkpoint at step (\d+)$`)
)

var _ = Describe("examples/pytorch on real kubelets", func() {
	var ns *corev1.Namespace
	BeforeEach(func() {
		ns = fw.NewNamespace(ctx, k8sClient)
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
		DeferCleanup(func() {
			if CurrentSpecReport().Failed() {
				dumpLogs(ns.Name)
			}
		})
	})

	It("restarts every rank in place, and training resumes from the checkpoint", func() {
		js := createExample(ns.Name, nil)
		before, firstRun := crashAfterCheckpoint(js, "touch /tmp/inplace-crash")

		got := util.ExpectJobSetCondition(ctx, k8sClient, js, jobset.JobSetCompleted, "AllJobsCompleted", timeout)
		Expect(got.Status.InPlaceRestarts).To(BeEquivalentTo(1), "one crash, one in-place restart")
		Expect(got.Status.Restarts).To(BeEquivalentTo(1), "a restart other than in place")
		Expect(podUIDs(js)).To(Equal(before), "every Pod kept its identity")
		expectResumed(js, firstRun())
	})

	It("fails the JobSet without a restart when a rank exits with a fatal code", func() {
		js := createExample(ns.Name, nil)
		_, firstRun := crashAfterCheckpoint(js, "echo 42 > /tmp/inplace-crash")

		got := util.ExpectJobSetCondition(ctx, k8sClient, js, jobset.JobSetFailed, "FailJobSetFailurePolicyAction", timeout)
		// The ranks of the other Pod fail as their peer vanishes, with
		// torchrun's exit code 1, at the same moment: when their kubelet
		// reports it before the fatal Pod's does, one in-place restart
		// begins, and the fatal exit ends it (docs/in-place-restart.md).
		Expect(got.Status.InPlaceRestarts).To(BeNumerically("<=", 1), "more than the one restart a peer's failure may begin")
		Expect(got.Status.Restarts).To(Equal(got.Status.InPlaceRestarts), "the fatal exit recreated the Pods")
		Expect(firstRun()).To(ContainSubstring("crashes with exit code 42"))
	})

	It("with Recreate, resumes from a shared volume in new Pods", func() {
		// Every real node is this host: a host directory is storage all
		// Pods share, as a ReadWriteMany claim would be on a cluster.
		shared := GinkgoT().TempDir()
		Expect(os.Chmod(shared, 0o777)).To(Succeed())
		js := createExample(ns.Name, func(js *jobset.JobSet) {
			js.Spec.FailurePolicy.RestartStrategy = jobset.Recreate
			// A failed Pod fails its Job, and the JobSet restarts: what the
			// webhook sets for InPlaceRestart, written out for Recreate.
			js.Spec.ReplicatedJobs[0].Template.Spec.BackoffLimit = ptr.To[int32](0)
			pod := &js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
			pod.Volumes = []corev1.Volume{{Name: "checkpoints", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: shared, Type: ptr.To(corev1.HostPathDirectory)},
			}}}
		})
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
func createExample(ns string, change func(*jobset.JobSet)) *jobset.JobSet {
	GinkgoHelper()
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(filepath.Join(root, "examples", "pytorch", "jobset.yaml"))
	Expect(err).NotTo(HaveOccurred())
	var sa corev1.ServiceAccount
	var js jobset.JobSet
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		Expect(err).NotTo(HaveOccurred())
		var meta metav1.TypeMeta
		Expect(yaml.Unmarshal(doc, &meta)).To(Succeed())
		switch meta.Kind {
		case "ServiceAccount":
			Expect(yaml.UnmarshalStrict(doc, &sa)).To(Succeed())
		case "JobSet":
			Expect(yaml.UnmarshalStrict(doc, &js)).To(Succeed())
		default:
			Fail("unexpected kind " + meta.Kind + " in examples/pytorch/jobset.yaml")
		}
	}
	sa.Namespace, js.Namespace = ns, ns
	c := &js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: "TRAIN_STEPS", Value: "150"}, corev1.EnvVar{Name: "CHECKPOINT_EVERY", Value: "20"})
	if change != nil {
		change(&js)
	}
	Expect(k8sClient.Create(ctx, &sa)).To(Succeed())
	Expect(k8sClient.Create(ctx, &js)).To(Succeed())
	return &js
}

// podOf is the JobSet's Pod of completion index i.
func podOf(js *jobset.JobSet, i int) corev1.Pod {
	GinkgoHelper()
	name := fmt.Sprintf("%s-workers-0-%d", js.Name, i)
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
		g.Expect(savedLine.FindString(podLog(pods[0], false))).NotTo(BeEmpty(), "no checkpoint yet")
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
	uids = podUIDs(js)
	pod := podOf(js, 0)
	firstRun = followLog(pod)
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
// resumed from the same checkpoint, after step 0, and the loss went on
// from where it was rather than from the untrained model's.
func expectResumed(js *jobset.JobSet, firstRun string) {
	GinkgoHelper()
	resumedAt := map[int]int{}
	var current string
	for i := range nodes {
		p := podOf(js, i)
		log := podLog(p, false)
		if i == 0 {
			current = log
		}
		for _, m := range resumedLine.FindAllStringSubmatch(log, -1) {
			rank, _ := strconv.Atoi(m[1])
			step, _ := strconv.Atoi(m[2])
			resumedAt[rank] = step
		}
	}
	Expect(resumedAt).To(HaveLen(ranks), "every rank logs that it resumed")
	step := resumedAt[0]
	Expect(step).To(BeNumerically(">", 0))
	for rank, s := range resumedAt {
		Expect(s).To(Equal(step), "rank %d resumed from another step", rank)
	}

	Expect(firstRun).To(ContainSubstring("crashes with exit code 1"))
	initial := lossAt(firstRun, 1)
	after := lossAt(current, step+1)
	Expect(after).To(BeNumerically("<", initial/2), "the loss after resuming (%v) is not below half the untrained model's (%v)", after, initial)
	// The data of a step is the same in every run: where the first run
	// got past the checkpoint, the resumed run repeats its loss.
	if same, ok := findLoss(firstRun, step+1); ok {
		Expect(after).To(BeNumerically("~", same, same*0.05), "step %d: loss %v after resuming, %v in the first run", step+1, after, same)
	} else {
		before := lossAt(firstRun, step)
		Expect(after).To(And(BeNumerically(">", before/2), BeNumerically("<", before*2)),
			"the loss after resuming (%v) is not that of the checkpoint's step (%v)", after, before)
	}
	Expect(current).To(ContainSubstring("training done at step 150"))
}

// lossAt is the loss a log shows at step.
func lossAt(log string, step int) float64 {
	GinkgoHelper()
	v, ok := findLoss(log, step)
	if !ok {
		Fail(fmt.Sprintf("no loss at step %d in:\n%s", step, log))
	}
	return v
}

func findLoss(log string, step int) (float64, bool) {
	for _, m := range stepLine.FindAllStringSubmatch(log, -1) {
		if m[1] == strconv.Itoa(step) {
			v, err := strconv.ParseFloat(m[2], 64)
			return v, err == nil
		}
	}
	return 0, false
}

// followLog follows the log of the Pod's container from its start until
// that container ends, and returns what it read then.
func followLog(p corev1.Pod) func() string {
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		stream, err := clientset.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: container, Follow: true}).Stream(ctx)
		if err != nil {
			return
		}
		defer stream.Close()
		_, _ = io.Copy(&buf, stream)
	}()
	return func() string {
		GinkgoHelper()
		Eventually(done).WithTimeout(timeout).Should(BeClosed(), "the log of %s's first run did not end", p.Name)
		return buf.String()
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

func dumpLogs(ns string) {
	pods, err := clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			for _, previous := range []bool{true, false} {
				data, err := clientset.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, Previous: previous, TailLines: ptr.To[int64](60)}).DoRaw(ctx)
				if err == nil {
					GinkgoWriter.Printf("=== log of %s/%s (previous %v)\n%s\n", p.Name, c.Name, previous, data)
				}
			}
		}
	}
}
