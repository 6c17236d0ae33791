package controller

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/test/wrappers"
)

var _ = Describe("JobSet lifecycle", func() {
	var ns *corev1.Namespace
	BeforeEach(func() {
		ns = fw.NewNamespace(ctx, k8sClient)
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
	})

	It("creates labelled child Jobs, a headless Service and Pods with DNS names, and completes", func() {
		js := create(wrappers.MakeJobSet("train", ns.Name).
			ReplicatedJob(wrappers.MakeReplicatedJob("driver").Obj()).
			ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Parallelism(2).Obj()).
			Obj())
		found := expectJobs(js, "0", "train-driver-0", "train-workers-0", "train-workers-1")

		w1 := found["train-workers-1"]
		Expect(w1.Labels).To(And(
			HaveKeyWithValue(jobset.JobSetNameKey, "train"),
			HaveKeyWithValue(jobset.JobSetUIDKey, string(get(js).UID)),
			HaveKeyWithValue(jobset.ReplicatedJobNameKey, "workers"),
			HaveKeyWithValue(jobset.ReplicatedJobReplicasKey, "2"),
			HaveKeyWithValue(jobset.JobIndexKey, "1"),
			HaveKeyWithValue(jobset.JobGlobalIndexKey, "2"),
			HaveKey(jobset.JobKey),
			HaveKeyWithValue(jobset.RestartsKey, "0"),
			HaveKeyWithValue(jobset.GroupNameKey, "default"),
			HaveKeyWithValue(jobset.GroupReplicasKey, "3"),
			HaveKeyWithValue(jobset.JobGroupIndexKey, "2"),
		))
		Expect(metav1.GetControllerOf(&w1)).To(HaveField("Name", "train"))

		var svc corev1.Service
		Eventually(func() error {
			return k8sClient.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "train"}, &svc)
		}).WithTimeout(timeout).Should(Succeed())
		Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
		Expect(svc.Spec.PublishNotReadyAddresses).To(BeTrue())
		Expect(svc.Spec.Selector).To(Equal(map[string]string{jobset.JobSetNameKey: "train"}))

		util.SetPodsRunning(ctx, k8sClient, ns.Name, "train-workers-1", 2)
		for _, p := range util.JobPods(ctx, k8sClient, ns.Name, "train-workers-1") {
			// <hostname>.<subdomain> resolves through the headless Service.
			Expect(p.Spec.Subdomain).To(Equal("train"))
			Expect(p.Spec.Hostname).To(MatchRegexp(`^train-workers-1-[01]$`))
			Expect(p.Labels).To(HaveKeyWithValue(jobset.JobIndexKey, "1"))
		}

		util.SetPodsRunning(ctx, k8sClient, ns.Name, "train-driver-0", 1)
		util.SetPodsRunning(ctx, k8sClient, ns.Name, "train-workers-0", 2)
		Eventually(func(g Gomega) {
			g.Expect(get(js).Status.ReplicatedJobsStatus).To(ConsistOf(
				jobset.ReplicatedJobStatus{Name: "driver", Ready: 1, Active: 1},
				jobset.ReplicatedJobStatus{Name: "workers", Ready: 2, Active: 2},
			))
		}).WithTimeout(timeout).Should(Succeed())

		for job, pods := range map[string]int{"train-driver-0": 1, "train-workers-0": 2, "train-workers-1": 2} {
			util.FinishJobPods(ctx, k8sClient, ns.Name, job, pods, 0)
		}
		got := expectCondition(js, jobset.JobSetCompleted, "True", "AllJobsCompleted")
		Expect(got.Status.TerminalState).To(Equal("Completed"))
		Expect(got.Status.ReplicatedJobsStatus).To(ConsistOf(
			jobset.ReplicatedJobStatus{Name: "driver", Succeeded: 1},
			jobset.ReplicatedJobStatus{Name: "workers", Succeeded: 2},
		))
		expectEvent(js, "AllJobsCompleted")
	})

	It("publishes the coordinator's endpoint on Jobs and Pods", func() {
		js := wrappers.MakeJobSet("coord", ns.Name).
			ReplicatedJob(wrappers.MakeReplicatedJob("leader").Obj()).
			ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Obj()).
			Obj()
		js.Spec.Coordinator = &jobset.Coordinator{ReplicatedJob: "leader"}
		create(js)
		found := expectJobs(js, "0", "coord-leader-0", "coord-workers-0", "coord-workers-1")
		for _, j := range found {
			Expect(j.Annotations).To(HaveKeyWithValue(jobset.CoordinatorKey, "coord-leader-0-0.coord"))
			Expect(j.Spec.Template.Labels).To(HaveKeyWithValue(jobset.CoordinatorKey, "coord-leader-0-0.coord"))
		}
	})

	It("completes with success policy Any on a target once one of its Jobs succeeds, and deletes the rest", func() {
		js := create(wrappers.MakeJobSet("any", ns.Name).
			ReplicatedJob(wrappers.MakeReplicatedJob("leader").Obj()).
			ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Obj()).
			SuccessPolicy(&jobset.SuccessPolicy{Operator: jobset.OperatorAny, TargetReplicatedJobs: []string{"leader"}}).
			Obj())
		expectJobs(js, "0", "any-leader-0", "any-workers-0", "any-workers-1")
		util.FinishJobPods(ctx, k8sClient, ns.Name, "any-workers-0", 1, 0)
		Eventually(func(g Gomega) {
			g.Expect(get(js).Status.ReplicatedJobsStatus).To(ContainElement(HaveField("Succeeded", int32(1))))
		}).WithTimeout(timeout).Should(Succeed())
		Expect(get(js).Status.TerminalState).To(BeEmpty(), "a non-target success completed the JobSet")

		util.FinishJobPods(ctx, k8sClient, ns.Name, "any-leader-0", 1, 0)
		expectCondition(js, jobset.JobSetCompleted, "True", "AllJobsCompleted")
		// Finished JobSets delete their still-active Jobs.
		Eventually(func(g Gomega) {
			g.Expect(jobNames(g, js)).To(Equal([]string{"any-leader-0", "any-workers-0"}))
		}).WithTimeout(timeout).Should(Succeed())
	})

	It("deletes a finished JobSet after ttlSecondsAfterFinished", func() {
		js := create(wrappers.MakeJobSet("ttl", ns.Name).
			ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).
			TTLSecondsAfterFinished(2).
			Obj())
		expectJobs(js, "0", "ttl-w-0")
		util.FinishJobPods(ctx, k8sClient, ns.Name, "ttl-w-0", 1, 0)
		done := expectCondition(js, jobset.JobSetCompleted, "True", "AllJobsCompleted")
		finishedAt := done.Status.Conditions[0].LastTransitionTime.Time
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(js), &jobset.JobSet{}))
		}).WithTimeout(timeout).Should(BeTrue())
		Expect(time.Since(finishedAt)).To(BeNumerically(">=", 2*time.Second-time.Second), "deleted before its TTL")
	})

	It("leaves a JobSet managed by another controller alone", func() {
		js := create(wrappers.MakeJobSet("elsewhere", ns.Name).
			ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).
			ManagedBy("example.com/other-controller").
			Obj())
		// A JobSet of ours created after it is reconciled: once its Jobs
		// exist, the other one has been seen too.
		ours := create(wrappers.MakeJobSet("ours", ns.Name).ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).Obj())
		expectJobs(ours, "0", "ours-w-0")
		Consistently(func(g Gomega) {
			g.Expect(jobNames(g, js)).To(BeEmpty())
			g.Expect(get(js).Status).To(Equal(jobset.JobSetStatus{}))
		}).WithTimeout(2 * time.Second).Should(Succeed())
	})

	It("suspends every Job at once and resumes them in startup order", func() {
		js := create(wrappers.MakeJobSet("pause", ns.Name).
			ReplicatedJob(wrappers.MakeReplicatedJob("driver").Obj()).
			ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Obj()).
			StartupPolicy(jobset.InOrder).
			Suspend(true).
			Obj())
		found := expectJobs(js, "0", "pause-driver-0", "pause-workers-0", "pause-workers-1")
		for _, j := range found {
			Expect(j.Spec.Suspend).To(Equal(ptr.To(true)), "job %s", j.Name)
		}
		expectCondition(js, jobset.JobSetSuspended, "True", "SuspendedJobs")
		expectEvent(js, "SuspendedJobs")

		// The controller writes the status concurrently: retry on conflict.
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			resume := get(js)
			resume.Spec.Suspend = ptr.To(false)
			return k8sClient.Update(ctx, resume)
		})).To(Succeed())
		expectCondition(js, jobset.JobSetSuspended, "False", "ResumeJobs")
		Eventually(func(g Gomega) {
			got := jobs(g, js)
			g.Expect(got["pause-driver-0"].Spec.Suspend).To(Equal(ptr.To(false)))
		}).WithTimeout(timeout).Should(Succeed())
		Consistently(func(g Gomega) {
			got := jobs(g, js)
			g.Expect(got["pause-workers-0"].Spec.Suspend).To(Equal(ptr.To(true)), "workers resumed before the driver is ready")
		}).WithTimeout(time.Second).Should(Succeed())

		util.SetPodsRunning(ctx, k8sClient, ns.Name, "pause-driver-0", 1)
		Eventually(func(g Gomega) {
			got := jobs(g, js)
			g.Expect(got["pause-workers-0"].Spec.Suspend).To(Equal(ptr.To(false)))
			g.Expect(got["pause-workers-1"].Spec.Suspend).To(Equal(ptr.To(false)))
		}).WithTimeout(timeout).Should(Succeed())
	})

	It("fails on the first Job failure without a failure policy, naming the Job", func() {
		js := create(wrappers.MakeJobSet("nopolicy", ns.Name).
			ReplicatedJob(wrappers.MakeReplicatedJob("w").Replicas(2).Obj()).
			Obj())
		expectJobs(js, "0", "nopolicy-w-0", "nopolicy-w-1")
		util.FinishJobPods(ctx, k8sClient, ns.Name, "nopolicy-w-1", 1, 1)
		got := expectCondition(js, jobset.JobSetFailed, "True", "FailedJobs")
		Expect(got.Status.TerminalState).To(Equal("Failed"))
		Expect(got.Status.Restarts).To(BeZero())
		Expect(findCondition(got, jobset.JobSetFailed).Message).To(ContainSubstring("nopolicy-w-1"))
		expectEvent(js, "FailedJobs")
	})
})

func findCondition(js *jobset.JobSet, t jobset.JobSetConditionType) *metav1.Condition {
	for i := range js.Status.Conditions {
		if js.Status.Conditions[i].Type == string(t) {
			return &js.Status.Conditions[i]
		}
	}
	return nil
}
