package controller

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/test/wrappers"
)

var _ = Describe("startup policy (KEP-104)", func() {
	var ns *corev1.Namespace
	BeforeEach(func() {
		ns = fw.NewNamespace(ctx, k8sClient)
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
	})

	// notYet asserts for a moment that the Jobs are still exactly names.
	notYet := func(js *jobset.JobSet, names ...string) {
		GinkgoHelper()
		Consistently(func(g Gomega) {
			g.Expect(jobNames(g, js)).To(Equal(names))
		}).WithTimeout(time.Second).Should(Succeed())
	}

	It("Story 1: the driver is ready before the workers start", func() {
		js := create(loadSpec("startup-story1.yaml", ns.Name))
		expectJobs(js, "0", "driver-ready-worker-start-driver-0")
		got := expectCondition(js, jobset.JobSetStartupPolicyInProgress, "True", "InOrderStartupPolicyInProgress")
		Expect(findCondition(got, jobset.JobSetStartupPolicyInProgress).Message).To(Equal("replicated job driver is starting"))
		expectCondition(js, jobset.JobSetStartupPolicyCompleted, "False", "InOrderStartupPolicyInProgress")
		notYet(js, "driver-ready-worker-start-driver-0")

		util.SetPodsRunning(ctx, k8sClient, ns.Name, "driver-ready-worker-start-driver-0", 1)
		expectJobs(js, "0", "driver-ready-worker-start-driver-0", "driver-ready-worker-start-workers-0")
		Eventually(func(g Gomega) {
			c := findCondition(get(js), jobset.JobSetStartupPolicyInProgress)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Message).To(Equal("replicated job workers is starting"))
		}).WithTimeout(timeout).Should(Succeed())

		util.SetPodsRunning(ctx, k8sClient, ns.Name, "driver-ready-worker-start-workers-0", 2)
		expectCondition(js, jobset.JobSetStartupPolicyCompleted, "True", "InOrderStartupPolicyCompleted")
		expectCondition(js, jobset.JobSetStartupPolicyInProgress, "False", "InOrderStartupPolicyCompleted")
	})

	It("Story 2: message queue, then driver, then workers", func() {
		js := create(loadSpec("startup-story2.yaml", ns.Name))
		name := "messagequeue-driver-worker"
		expectJobs(js, "0", name+"-messagequeue-0")
		notYet(js, name+"-messagequeue-0")

		util.SetPodsRunning(ctx, k8sClient, ns.Name, name+"-messagequeue-0", 1)
		expectJobs(js, "0", name+"-messagequeue-0", name+"-driver-0", name+"-driver-1")
		util.SetPodsRunning(ctx, k8sClient, ns.Name, name+"-driver-0", 2)
		notYet(js, name+"-driver-0", name+"-driver-1", name+"-messagequeue-0")

		util.SetPodsRunning(ctx, k8sClient, ns.Name, name+"-driver-1", 2)
		expectJobs(js, "0", name+"-messagequeue-0", name+"-driver-0", name+"-driver-1", name+"-worker-0", name+"-worker-1")
		util.SetPodsRunning(ctx, k8sClient, ns.Name, name+"-worker-0", 2)
		util.SetPodsRunning(ctx, k8sClient, ns.Name, name+"-worker-1", 2)
		expectCondition(js, jobset.JobSetStartupPolicyCompleted, "True", "InOrderStartupPolicyCompleted")
	})

	It("runs the startup order again after a restart", func() {
		js := create(wrappers.MakeJobSet("again", ns.Name).
			ReplicatedJob(wrappers.MakeReplicatedJob("driver").Obj()).
			ReplicatedJob(wrappers.MakeReplicatedJob("workers").Obj()).
			StartupPolicy(jobset.InOrder).
			FailurePolicy(&jobset.FailurePolicy{MaxRestarts: 1}).
			Obj())
		expectJobs(js, "0", "again-driver-0")
		util.SetPodsRunning(ctx, k8sClient, ns.Name, "again-driver-0", 1)
		expectJobs(js, "0", "again-driver-0", "again-workers-0")
		util.SetPodsRunning(ctx, k8sClient, ns.Name, "again-workers-0", 1)
		expectCondition(js, jobset.JobSetStartupPolicyCompleted, "True", "InOrderStartupPolicyCompleted")

		failPod(ns.Name, "again-workers-0", 1)
		expectRestarts(js, 1, 1)
		expectJobs(js, "1", "again-driver-0")
		expectCondition(js, jobset.JobSetStartupPolicyInProgress, "True", "InOrderStartupPolicyInProgress")
		notYet(js, "again-driver-0")
		util.SetPodsRunning(ctx, k8sClient, ns.Name, "again-driver-0", 1)
		expectJobs(js, "1", "again-driver-0", "again-workers-0")
	})

	DescribeTable("dependsOn creates a replicated Job once its dependency reached the status",
		func(status jobset.DependsOnStatus) {
			js := create(wrappers.MakeJobSet("deps", ns.Name).
				ReplicatedJob(wrappers.MakeReplicatedJob("init").Obj()).
				ReplicatedJob(wrappers.MakeReplicatedJob("main").DependsOn("init", status).Obj()).
				Obj())
			expectJobs(js, "0", "deps-init-0")
			util.SetPodsRunning(ctx, k8sClient, ns.Name, "deps-init-0", 1)
			if status == jobset.DependencyComplete {
				notYet(js, "deps-init-0")
				util.FinishJobPods(ctx, k8sClient, ns.Name, "deps-init-0", 1, 0)
			}
			expectJobs(js, "0", "deps-init-0", "deps-main-0")
		},
		Entry("Ready", jobset.DependencyReady),
		Entry("Complete", jobset.DependencyComplete),
	)
})
