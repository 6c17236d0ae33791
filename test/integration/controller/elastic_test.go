package controller

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/test/wrappers"
)

// Elastic replicated jobs: an update scales the parallelism and
// completions of an Indexed replicated job, and the running Jobs follow.
var _ = Describe("elastic replicated jobs", func() {
	var ns *corev1.Namespace
	BeforeEach(func() {
		ns = fw.NewNamespace(ctx, k8sClient)
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
	})

	// scale updates a replicated job's parallelism and completions through
	// the webhooks, as kubectl edit does.
	scale := func(js *jobset.JobSet, rj int, n int32) {
		GinkgoHelper()
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			current := get(js)
			current.Spec.ReplicatedJobs[rj].Template.Spec.Parallelism = ptr.To(n)
			current.Spec.ReplicatedJobs[rj].Template.Spec.Completions = ptr.To(n)
			return k8sClient.Update(ctx, current)
		})).To(Succeed())
	}
	expectJobSizes := func(js *jobset.JobSet, n int32, names ...string) map[string]batchv1.Job {
		GinkgoHelper()
		var got map[string]batchv1.Job
		Eventually(func(g Gomega) {
			got = jobs(g, js)
			g.Expect(sortedKeys(got)).To(Equal(names))
			for _, j := range got {
				g.Expect(j.Spec.Parallelism).To(Equal(ptr.To(n)), "parallelism of %s", j.Name)
				g.Expect(j.Spec.Completions).To(Equal(ptr.To(n)), "completions of %s", j.Name)
			}
		}).WithTimeout(timeout).Should(Succeed())
		return got
	}
	jobPods := func(js *jobset.JobSet, job string, want int) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			g.Expect(util.JobPods(ctx, k8sClient, js.Namespace, job)).To(HaveLen(want), "Pods of %s", job)
		}).WithTimeout(timeout).Should(Succeed())
	}

	It("scales the running Jobs up and back down, keeping them, with an Event per scale", func() {
		js := create(wrappers.MakeJobSet("elastic", ns.Name).
			ReplicatedJob(wrappers.MakeReplicatedJob("w").Replicas(2).Parallelism(2).Obj()).Obj())
		before := expectJobSizes(js, 2, "elastic-w-0", "elastic-w-1")
		util.SetPodsRunning(ctx, k8sClient, ns.Name, "elastic-w-0", 2)

		scale(js, 0, 4)
		after := expectJobSizes(js, 4, "elastic-w-0", "elastic-w-1")
		for name, j := range after {
			Expect(j.UID).To(Equal(before[name].UID), "the scale recreated Job %s", name)
		}
		jobPods(js, "elastic-w-0", 4)
		jobPods(js, "elastic-w-1", 4)
		expectEvent(js, "ReplicatedJobScaled")

		scale(js, 0, 2)
		expectJobSizes(js, 2, "elastic-w-0", "elastic-w-1")
		jobPods(js, "elastic-w-0", 2)
		jobPods(js, "elastic-w-1", 2)
		got := get(js)
		Expect(got.Status.Restarts).To(BeZero())
		Expect(got.Status.TerminalState).To(BeEmpty())
	})

	It("restarts an InPlaceRestart group in place at its new size, not counted towards maxRestarts", func() {
		rj := wrappers.MakeReplicatedJob("w").Replicas(1).Parallelism(2).Obj()
		rj.Template.Spec.BackoffLimit = nil // set by the webhook for InPlaceRestart
		js := create(wrappers.MakeJobSet("ipscale", ns.Name).ReplicatedJob(rj).
			FailurePolicy(&jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart, MaxRestarts: 1}).Obj())
		before := expectJobSizes(js, 2, "ipscale-w-0")
		reportEpoch(js, 2, "1")
		Eventually(func(g Gomega) {
			got := get(js)
			g.Expect(got.Status.SyncedEpoch).To(Equal(int32(1)))
			g.Expect(got.Status.SyncedPods).To(Equal(int32(2)))
		}).WithTimeout(timeout).Should(Succeed())

		scale(js, 0, 4)
		expectJobSizes(js, 4, "ipscale-w-0")
		got := expectCondition(js, jobset.JobSetRestarting, "True", "InPlaceRestartForScale")
		Expect(findCondition(got, jobset.JobSetRestarting).Message).To(ContainSubstring("scaled from 2 to 4 Pods"))
		Expect(got.Status.DeprecatedEpoch).To(Equal(int32(1)))
		expectEvent(js, "ReplicatedJobScaled")
		expectEvent(js, "InPlaceRestartForScale")

		// The new Pods' agents and the restarted survivors report epoch 2.
		pods := reportEpoch(js, 4, "2")
		Eventually(func(g Gomega) {
			got := get(js)
			g.Expect(got.Status.SyncedEpoch).To(Equal(int32(2)))
			g.Expect(got.Status.SyncedPods).To(Equal(int32(4)))
		}).WithTimeout(timeout).Should(Succeed())
		got = expectCondition(js, jobset.JobSetRestarting, "False", "InPlaceRestartCompleted")
		Expect(got.Status.Restarts).To(BeZero())
		Expect(got.Status.InPlaceRestarts).To(BeZero())
		Expect(got.Status.RestartsCountTowardsMax).To(BeZero())
		Expect(uids(js)["ipscale-w-0"]).To(Equal(before["ipscale-w-0"].UID), "the scale recreated the Job")

		// maxRestarts 1 is still whole: a failure restarts in place once.
		util.ExitContainer(ctx, k8sClient, &pods[0], "worker", 1)
		got = expectCondition(js, jobset.JobSetRestarting, "True", "InPlaceRestart")
		Expect(got.Status.RestartsCountTowardsMax).To(Equal(int32(1)))
		if c := findCondition(got, jobset.JobSetFailed); c != nil {
			Expect(c.Status).NotTo(Equal(metav1.ConditionTrue), "the JobSet failed: %+v", c)
		}
	})
})
