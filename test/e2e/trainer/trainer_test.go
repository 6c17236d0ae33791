package trainer

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
	"github.com/inplace-dev/inplace/controller/decide"
	"github.com/inplace-dev/inplace/test/kubeflowtrainer"
	example "github.com/inplace-dev/inplace/test/pytorch"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/webhook/inject"
)

// The commands of docs/how-to/kubeflow-trainer.md's steps 5 and 6.
const (
	createTrainJob = "kubectl apply -n team-a -f examples/pytorch/trainer/trainjob.yaml"
	showStrategy   = `kubectl get jobset -n team-a pytorch -o jsonpath='{.spec.failurePolicy.restartStrategy} {.spec.failurePolicy.maxRestarts} {.metadata.annotations.inplace\.dev/restart-scope}{"\n"}'`
	waitJobSet     = "kubectl wait -n team-a --for=create jobset/pytorch --timeout=2m"
	crash          = `POD=$(kubectl get pods -n team-a -l batch.kubernetes.io/job-completion-index=0 -o name)
kubectl exec -n team-a "$POD" -c node -- touch /tmp/inplace-crash`
	showLog      = "kubectl logs -n team-a -l batch.kubernetes.io/job-completion-index=0 -c node --tail=-1 | grep -E 'crashes|barrier of epoch 2|resumed'"
	showTrainJob = "kubectl get trainjob -n team-a pytorch"
	showJobSet   = "kubectl get jobset -n team-a pytorch"
)

const (
	// replicatedJob is the replicated Job of Trainer's torch runtimes,
	// and container its training container.
	replicatedJob = "node"
	container     = "node"
	ranks         = nodes * 2
	// timeout bounds each wait: a first start imports torch on 4 ranks
	// sharing 2 cores with the cluster.
	timeout = 4 * time.Minute
	// epochLifted splits a process-scope container's log where its
	// supervisor started the worker again after the restart.
	epochLifted = "inplace-supervisor: barrier of epoch 2 lifted"
)

var _ = Describe("Kubeflow Trainer "+kubeflowtrainer.Module.Version+", built from its module", func() {
	It("trains a TrainJob to completion, its JobSet made to restart in place by a cluster-admin policy, a crashed rank restarting every rank in place from the checkpoint", func() {
		util.ExpectPolicyReady(ctx, k8sClient, &policyv1alpha1.JobSetPolicy{ObjectMeta: metav1.ObjectMeta{Name: "trainer-restart-in-place"}}, metav1.ConditionTrue, time.Minute)
		ns := fw.NewNamespace(ctx, k8sClient)
		DeferCleanup(func() {
			if CurrentSpecReport().Failed() {
				util.DumpContainerLogs(ctx, clientset, ns.Name, 60)
			}
		})
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)

		By("a TrainJob, as its author writes it: " + createTrainJob)
		runPage(ns.Name, createTrainJob, time.Minute, "trainjob.trainer.kubeflow.org/pytorch created")
		tj := &unstructured.Unstructured{}
		tj.SetGroupVersionKind(schema.GroupVersionKind{Group: "trainer.kubeflow.org", Version: "v1alpha1", Kind: "TrainJob"})
		tj.SetName("pytorch")
		tj.SetNamespace(ns.Name)
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tj), tj)).To(Succeed())

		By("Trainer's JobSet restarts in place, in process scope, its agent injected")
		runPage(ns.Name, waitJobSet, 3*time.Minute, "jobset.jobset.x-k8s.io/pytorch condition met")
		js := &jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Name: tj.GetName(), Namespace: ns.Name}}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(js), js)).To(Succeed())
		Expect(metav1.IsControlledBy(js, tj)).To(BeTrue(), "the TrainJob owns its JobSet")
		runPage(ns.Name, showStrategy, time.Minute, "InPlaceRestart 5 process")
		Expect(js.Annotations).To(HaveKey(inject.InjectedAnnotation))

		By("a rank crashes after a checkpoint")
		waitForCheckpoint(js)
		before := podUIDs(js)
		runPage(ns.Name, crash, 30*time.Second)

		By("every rank restarts in place; the TrainJob never fails nor counts a failed Job (polled each second), then completes")
		// Trainer has no Running condition: its jobsStatus, copied from
		// the JobSet's replicatedJobsStatus, says whether its Job runs.
		// The Job is seen active after the crash, before completion (when
		// the last Pod ends, it is counted neither active nor succeeded
		// for a moment, so that is not required at every poll).
		sawActive := false
		Eventually(func(g Gomega) {
			got := getTrainJob(g, tj)
			conds, err := util.Conditions(got)
			g.Expect(err).NotTo(HaveOccurred())
			if c := meta.FindStatusCondition(conds, "Failed"); c != nil && c.Status == metav1.ConditionTrue {
				StopTrying("the TrainJob failed: " + c.Message).Now()
			}
			jobs := trainJobJobs(g, got)
			g.Expect(jobs).To(HaveKey(replicatedJob), "jobsStatus %v", jobs)
			j := jobs[replicatedJob]
			if j.Failed > 0 {
				StopTrying(fmt.Sprintf("the TrainJob counts a failed Job %s: %+v", replicatedJob, j)).Now()
			}
			complete := meta.IsStatusConditionTrue(conds, "Complete")
			if !complete {
				sawActive = sawActive || j.Active > 0
			}
			g.Expect(complete).To(BeTrue(), "not complete yet")
			g.Expect(j.Succeeded).To(BeEquivalentTo(1), "jobsStatus %v", jobs)
		}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
		Expect(sawActive).To(BeTrue(), "the TrainJob's Job %s was never seen active after the crash", replicatedJob)
		got := util.ExpectJobSetCondition(ctx, k8sClient, js, jobset.JobSetCompleted, decide.ReasonAllJobsCompleted, time.Minute)
		Expect(got.Status.InPlaceRestarts).To(BeEquivalentTo(1), "one crash, one in-place restart")
		Expect(podUIDs(js)).To(Equal(before), "every Pod kept its identity")
		runPage(ns.Name, showLog, time.Minute,
			"rank 0 crashes with exit code 1 at step 29, as /tmp/inplace-crash asked",
			"inplace-supervisor: barrier of epoch 2 lifted: started the worker (pid 33)",
			"rank 0 resumed from checkpoint at step 20",
			"rank 1 resumed from checkpoint at step 20")
		runPage(ns.Name, showTrainJob, time.Minute, "NAME      STATE      AGE", "pytorch   Complete   44s")
		runPage(ns.Name, showJobSet, time.Minute, "NAME      TERMINALSTATE   RESTARTS   EPOCH   COMPLETED   AGE", "pytorch   Completed       1          2       True        44s")

		By("every rank resumed from the checkpoint and trained to the end")
		var resumed [][]example.Line
		for i := range nodes {
			p := podOf(js, i)
			for _, s := range p.Status.ContainerStatuses {
				Expect(s.RestartCount).To(BeZero(), "container %s of %s restarted: process scope restarts processes", s.Name, p.Name)
			}
			_, second, found := strings.Cut(podLog(p), epochLifted)
			Expect(found).To(BeTrue(), "the supervisor of %s did not start the worker at epoch 2", p.Name)
			resumed = append(resumed, example.ParseLog(second, false))
		}
		run := example.ReadRun(resumed...)
		step, err := run.ResumedStep(ranks)
		Expect(err).NotTo(HaveOccurred())
		Expect(step).To(BeNumerically(">", 0), "resumed from a checkpoint after step 0")
		Expect(run.Done).To(BeTrue(), "training did not finish after resuming")
	})
})

// getTrainJob reads the TrainJob again.
func getTrainJob(g Gomega, tj *unstructured.Unstructured) *unstructured.Unstructured {
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(tj.GroupVersionKind())
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tj), got)).To(Succeed())
	return got
}

// jobCounts is an entry of a TrainJob's status.jobsStatus: of its
// replicated Job's child Jobs, how many are active, failed, succeeded.
type jobCounts struct {
	Name      string `json:"name"`
	Active    int32  `json:"active"`
	Failed    int32  `json:"failed"`
	Succeeded int32  `json:"succeeded"`
}

// trainJobJobs reads a TrainJob's status.jobsStatus, by name.
func trainJobJobs(g Gomega, tj *unstructured.Unstructured) map[string]jobCounts {
	list, _, err := unstructured.NestedSlice(tj.Object, "status", "jobsStatus")
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]jobCounts{}
	for _, item := range list {
		m, ok := item.(map[string]any)
		g.Expect(ok).To(BeTrue(), "jobsStatus entry %v", item)
		var j jobCounts
		g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(m, &j)).To(Succeed(), "jobsStatus entry %v", item)
		out[j.Name] = j
	}
	return out
}

// waitForCheckpoint waits until node 0's ranks saved a checkpoint.
func waitForCheckpoint(js *jobset.JobSet) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(util.JobSetPods(ctx, k8sClient, js)).To(HaveLen(nodes))
		run := example.ReadRun(example.ParseLog(podLog(podOf(js, 0)), false))
		g.Expect(run.LastSaved()).To(BeNumerically(">", 0), "no checkpoint yet")
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
}

// podOf is the JobSet's Pod of completion index i.
func podOf(js *jobset.JobSet, i int) corev1.Pod {
	GinkgoHelper()
	for _, p := range util.JobSetPods(ctx, k8sClient, js) {
		if p.Labels[jobset.JobIndexKey] == "0" && p.Annotations[batchv1.JobCompletionIndexAnnotation] == strconv.Itoa(i) && p.DeletionTimestamp == nil {
			return p
		}
	}
	Fail("no Pod of completion index " + strconv.Itoa(i))
	return corev1.Pod{}
}

func podUIDs(js *jobset.JobSet) map[string]string {
	GinkgoHelper()
	out := map[string]string{}
	for _, p := range util.JobSetPods(ctx, k8sClient, js) {
		if p.DeletionTimestamp == nil {
			out[p.Name] = string(p.UID)
		}
	}
	Expect(out).To(HaveLen(nodes))
	return out
}

func podLog(p corev1.Pod) string {
	GinkgoHelper()
	data, err := clientset.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	if err != nil {
		return ""
	}
	return string(data)
}
