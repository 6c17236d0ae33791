package controller

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/framework"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/test/wrappers"
)

// reconciles is how many reconciles of JobSets this process finished.
// controller-runtime counts them on its global registry, not on the
// manager's own: the count is per process, and this suite runs one manager
// at a time.
func reconciles() float64 {
	GinkgoHelper()
	return framework.MetricValue(ctrlmetrics.Registry, "controller_runtime_reconcile_total", "controller", "jobset")
}

var _ = Describe("a restarted manager", Ordered, func() {
	It("reconciles every JobSet again without writing anything", func() {
		ns := fw.NewNamespace(ctx, k8sClient)
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
		js := create(wrappers.MakeJobSet("steady", ns.Name).
			ReplicatedJob(wrappers.MakeReplicatedJob("driver").Obj()).
			ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Obj()).
			StartupPolicy(jobset.InOrder).
			Obj())
		expectJobs(js, "0", "steady-driver-0")
		util.SetPodsRunning(ctx, k8sClient, ns.Name, "steady-driver-0", 1)
		expectJobs(js, "0", "steady-driver-0", "steady-workers-0", "steady-workers-1")
		util.SetPodsRunning(ctx, k8sClient, ns.Name, "steady-workers-0", 1)
		util.SetPodsRunning(ctx, k8sClient, ns.Name, "steady-workers-1", 1)
		expectCondition(js, jobset.JobSetStartupPolicyCompleted, "True", "InOrderStartupPolicyCompleted")
		Eventually(func(g Gomega) {
			g.Expect(get(js).Status.ReplicatedJobsStatus).To(ConsistOf(
				jobset.ReplicatedJobStatus{Name: "driver", Ready: 1, Active: 1},
				jobset.ReplicatedJobStatus{Name: "workers", Ready: 2, Active: 2},
			))
		}).WithTimeout(timeout).Should(Succeed())

		versions := func() map[string]string {
			out := map[string]string{"jobset": get(js).ResourceVersion}
			Eventually(func(g Gomega) {
				for name, j := range jobs(g, js) {
					out[name] = j.ResourceVersion
				}
			}).Should(Succeed())
			var svc corev1.Service
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "steady"}, &svc)).To(Succeed())
			out["service"] = svc.ResourceVersion
			return out
		}
		versionsBefore := versions()

		fw.StopManager()
		var all jobset.JobSetList
		Expect(k8sClient.List(ctx, &all)).To(Succeed())
		start := reconciles()
		before := len(fw.ManagerWrites())
		fw.StartManager(cfg)
		// The new manager lists every JobSet and reconciles each once.
		Eventually(reconciles).WithTimeout(timeout).Should(BeNumerically(">=", start+float64(len(all.Items))))

		// Writes for other namespaces may concern JobSets of earlier specs
		// still being torn down; this namespace's JobSet did not change.
		var ours []string
		for _, w := range fw.ManagerWrites()[before:] {
			if strings.Contains(w, "/namespaces/"+ns.Name+"/") {
				ours = append(ours, w)
			}
		}
		Expect(ours).To(BeEmpty(), "the manager sent writes for an unchanged JobSet")
		Expect(versions()).To(Equal(versionsBefore), "a reconcile of an unchanged JobSet changed an object")
	})
})
