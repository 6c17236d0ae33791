package controller

import (
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/test/wrappers"
)

// failPod makes the first Pod of a Job exit with code, which (with
// backoffLimit 0 or a matching podFailurePolicy) fails the Job through the
// real Job controller.
func failPod(namespace, job string, code int32) {
	GinkgoHelper()
	var pods []corev1.Pod
	Eventually(func(g Gomega) {
		pods = util.JobPods(ctx, k8sClient, namespace, job)
		g.Expect(pods).NotTo(BeEmpty(), "pods of job %s", job)
	}).WithTimeout(timeout).Should(Succeed())
	util.FinishPod(ctx, k8sClient, &pods[0], code)
}

// uids returns the UIDs of the JobSet's Jobs by name.
func uids(js *jobset.JobSet) map[string]types.UID {
	GinkgoHelper()
	out := map[string]types.UID{}
	Eventually(func(g Gomega) {
		for name, j := range jobs(g, js) {
			out[name] = j.UID
		}
	}).Should(Succeed())
	return out
}

var _ = Describe("failure policy (KEP-262)", func() {
	var ns *corev1.Namespace
	BeforeEach(func() {
		ns = fw.NewNamespace(ctx, k8sClient)
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
	})

	It("Story 1: FailJobSet fails at once on a non-retriable exit code, without a restart", func() {
		js := create(loadSpec("failurepolicy-story1.yaml", ns.Name))
		expectJobs(js, "0", "fail-jobset-example-buggy-job-0")
		failPod(ns.Name, "fail-jobset-example-buggy-job-0", 1)

		got := expectCondition(js, jobset.JobSetFailed, "True", "FailJobSetFailurePolicyAction")
		Expect(got.Status.TerminalState).To(Equal("Failed"))
		Expect(got.Status.Restarts).To(BeZero(), "maxRestarts 10 left unused")
		Expect(findCondition(got, jobset.JobSetFailed).Message).To(ContainSubstring("fail-jobset-example-buggy-job-0"))
		expectEvent(js, "FailJobSetFailurePolicyAction")
	})

	It("Story 2: RestartJobSet recreates every Job and counts the restart", func() {
		js := create(loadSpec("failurepolicy-story2.yaml", ns.Name))
		expectJobs(js, "0", "restart-jobset-example-buggy-job-0")
		failPod(ns.Name, "restart-jobset-example-buggy-job-0", 1)

		expectRestarts(js, 1, 1)
		expectJobs(js, "1", "restart-jobset-example-buggy-job-0")
		expectCondition(js, jobset.JobSetRestarting, "True", "FailurePolicy_failurePolicyRule0")
		expectEvent(js, "RestartJobSetFailurePolicyAction")
		// The Job of the failed attempt was deleted once: a reconcile that
		// ran before the cache showed its deletion did not send it again.
		Expect(managerWrites("DELETE", "/namespaces/"+ns.Name+"/jobs/")).To(Equal(1))

		// The new attempt's Pods become ready: the restart is over.
		util.SetPodsRunning(ctx, k8sClient, ns.Name, "restart-jobset-example-buggy-job-0", 4)
		expectCondition(js, jobset.JobSetRestarting, "False", "JobsReady")
	})

	It("Story 3: RestartJobSetAndIgnoreMaxRestarts restarts on host maintenance without counting", func() {
		js := create(loadSpec("failurepolicy-story3.yaml", ns.Name))
		job := "ignore-max-restarts-example-workers-0"
		expectJobs(js, "0", job)

		failPod(ns.Name, job, 143) // SIGTERM: PodFailurePolicy
		expectRestarts(js, 1, 0)
		expectJobs(js, "1", job)

		failPod(ns.Name, job, 1) // a bug: BackoffLimitExceeded, no rule: RestartJobSet
		expectRestarts(js, 2, 1)
		expectCondition(js, jobset.JobSetRestarting, "True", "DefaultFailurePolicy")
	})

	It("Story 4: different policies for different replicated Jobs", func() {
		js := create(loadSpec("failurepolicy-story4.yaml", ns.Name))
		name := "per-replicated-job-policies"
		expectJobs(js, "0", name+"-workers-0", name+"-workers-1", name+"-workers-2", name+"-workers-3", name+"-workers-4", name+"-parameter-server-0")

		failPod(ns.Name, name+"-workers-3", 1)
		expectRestarts(js, 1, 0)
		expectJobs(js, "1", name+"-workers-0", name+"-workers-1", name+"-workers-2", name+"-workers-3", name+"-workers-4", name+"-parameter-server-0")

		failPod(ns.Name, name+"-parameter-server-0", 1)
		expectRestarts(js, 2, 1)
	})

	It("allows exactly maxRestarts counted restarts, then fails with ReachedMaxRestarts", func() {
		js := create(wrappers.MakeJobSet("max", ns.Name).
			ReplicatedJob(wrappers.MakeReplicatedJob("w").Replicas(2).Obj()).
			FailurePolicy(&jobset.FailurePolicy{MaxRestarts: 2}).
			Obj())
		for attempt := range int32(2) {
			expectJobs(js, itoa(attempt), "max-w-0", "max-w-1")
			failPod(ns.Name, "max-w-1", 1)
			expectRestarts(js, attempt+1, attempt+1)
		}
		expectJobs(js, "2", "max-w-0", "max-w-1")
		failPod(ns.Name, "max-w-0", 1)
		got := expectCondition(js, jobset.JobSetFailed, "True", "ReachedMaxRestarts")
		Expect(got.Status.Restarts).To(Equal(int32(2)))
		Expect(got.Status.RestartsCountTowardsMax).To(Equal(int32(2)))
		Expect(findCondition(got, jobset.JobSetFailed).Message).To(ContainSubstring("max-w-0"))
		expectCondition(js, jobset.JobSetRestarting, "False", "JobSetFailed")
	})

	It("applies the default action when targetReplicatedJobs does not match", func() {
		js := create(wrappers.MakeJobSet("target", ns.Name).
			ReplicatedJob(wrappers.MakeReplicatedJob("workers").Obj()).
			ReplicatedJob(wrappers.MakeReplicatedJob("ps").Obj()).
			FailurePolicy(&jobset.FailurePolicy{MaxRestarts: 1, Rules: []jobset.FailurePolicyRule{
				{Name: "psFails", Action: jobset.FailJobSet, TargetReplicatedJobs: []string{"ps"}},
			}}).
			Obj())
		expectJobs(js, "0", "target-workers-0", "target-ps-0")
		failPod(ns.Name, "target-workers-0", 1)
		expectRestarts(js, 1, 1)
		Expect(get(js).Status.TerminalState).To(BeEmpty())
	})

	It("matches onJobFailureMessagePatterns against the Job's failure message", func() {
		js := create(wrappers.MakeJobSet("pattern", ns.Name).
			ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).
			FailurePolicy(&jobset.FailurePolicy{MaxRestarts: 3, Rules: []jobset.FailurePolicyRule{
				{Name: "neverMatches", Action: jobset.FailJobSet, OnJobFailureMessagePatterns: []string{"^no such message$"}},
				{Name: "backoff", Action: jobset.RestartJobSetAndIgnoreMaxRestarts, OnJobFailureMessagePatterns: []string{"(?i)backoff limit"}},
			}}).
			Obj())
		expectJobs(js, "0", "pattern-w-0")
		failPod(ns.Name, "pattern-w-0", 1)
		expectRestarts(js, 1, 0)
		expectCondition(js, jobset.JobSetRestarting, "True", "FailurePolicy_backoff")
	})

	It("RestartJob recreates only the failed Job", func() {
		js := create(wrappers.MakeJobSet("single", ns.Name).
			ReplicatedJob(wrappers.MakeReplicatedJob("w").Replicas(3).Obj()).
			FailurePolicy(&jobset.FailurePolicy{MaxRestarts: 1, Rules: []jobset.FailurePolicyRule{
				{Name: "one", Action: jobset.RestartJob},
			}}).
			Obj())
		expectJobs(js, "0", "single-w-0", "single-w-1", "single-w-2")
		before := uids(js)

		failPod(ns.Name, "single-w-1", 1)
		Eventually(func(g Gomega) {
			now := jobs(g, js)
			g.Expect(now).To(HaveLen(3))
			g.Expect(now["single-w-1"].UID).NotTo(Equal(before["single-w-1"]), "failed job replaced")
			g.Expect(now["single-w-1"].Labels).To(HaveKeyWithValue("jobset.sigs.k8s.io/job-restart-attempt", "1"))
		}).WithTimeout(timeout).Should(Succeed())
		after := uids(js)
		Expect(after["single-w-0"]).To(Equal(before["single-w-0"]), "other jobs untouched")
		Expect(after["single-w-2"]).To(Equal(before["single-w-2"]), "other jobs untouched")
		got := get(js)
		Expect(got.Status.Restarts).To(BeZero())
		Expect(got.Status.ReplicatedJobsStatus[0].JobRestarts).To(Equal([]int32{0, 1, 0}))
		Expect(got.Status.ReplicatedJobsStatus[0].JobRestartsCountTowardsMax).To(Equal([]int32{0, 1, 0}))

		// The one counted restart is used: the next failure fails the JobSet.
		failPod(ns.Name, "single-w-2", 1)
		expectCondition(js, jobset.JobSetFailed, "True", "ReachedMaxRestarts")
	})

	DescribeTable("Recreate and BlockingRecreate order the recreation",
		func(strategy jobset.JobSetRestartStrategy) {
			js := create(wrappers.MakeJobSet("order", ns.Name).
				ReplicatedJob(wrappers.MakeReplicatedJob("w").Replicas(2).Obj()).
				FailurePolicy(&jobset.FailurePolicy{MaxRestarts: 1, RestartStrategy: strategy}).
				Obj())
			expectJobs(js, "0", "order-w-0", "order-w-1")
			// A finalizer holds one Pod of the first attempt: its Job cannot
			// finish its foreground deletion while the Pod exists.
			var held corev1.Pod
			Eventually(func(g Gomega) {
				pods := util.JobPods(ctx, k8sClient, ns.Name, "order-w-0")
				g.Expect(pods).To(HaveLen(1))
				held = pods[0]
			}).WithTimeout(timeout).Should(Succeed())
			// The Job controller updates its Pods concurrently: retry on conflict.
			Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
				Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(&held), &held)).To(Succeed())
				held.Finalizers = append(held.Finalizers, "test.inplace.dev/hold")
				return k8sClient.Update(ctx, &held)
			})).To(Succeed())

			failPod(ns.Name, "order-w-1", 1)
			expectRestarts(js, 1, 1)

			if strategy == jobset.BlockingRecreate {
				Consistently(func(g Gomega) {
					for _, j := range jobs(g, js) {
						g.Expect(j.Labels).To(HaveKeyWithValue(jobset.RestartsKey, "0"), "job %s of the new attempt created while a pod of the old one exists", j.Name)
					}
				}).WithTimeout(3 * time.Second).Should(Succeed())
			} else {
				// Recreate: the Job whose Pods are gone comes back at once.
				Eventually(func(g Gomega) {
					g.Expect(jobs(g, js)["order-w-1"].Labels).To(HaveKeyWithValue(jobset.RestartsKey, "1"))
				}).WithTimeout(timeout).Should(Succeed())
			}

			Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
				Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(&held), &held)).To(Succeed())
				held.Finalizers = nil
				return k8sClient.Update(ctx, &held)
			})).To(Succeed())
			expectJobs(js, "1", "order-w-0", "order-w-1")
		},
		Entry("Recreate", jobset.Recreate),
		Entry("BlockingRecreate", jobset.BlockingRecreate),
	)
})

func itoa(i int32) string { return strconv.Itoa(int(i)) }
