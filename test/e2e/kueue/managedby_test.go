package kueue

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/util"
)

// multiKueue is the controller name MultiKueue's admission check has, and
// the spec.managedBy Kueue defaults on the Jobs it dispatches to workers.
const multiKueue = "kueue.x-k8s.io/multikueue"

// multiKueueQueues is a MultiKueue manager's queues for namespace ns: a
// ClusterQueue whose admission check is MultiKueue's, dispatching to a
// worker cluster this cluster cannot reach (its kubeconfig Secret does
// not exist): what matters here happens before dispatch.
func multiKueueQueues(ns string) string {
	return fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: elsewhere-%[1]s
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueCluster
metadata:
  name: worker-%[1]s
spec:
  clusterSource:
    kubeConfig:
      locationType: Secret
      location: worker-%[1]s
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueConfig
metadata:
  name: workers-%[1]s
spec:
  clusters: [worker-%[1]s]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata:
  name: multikueue-%[1]s
spec:
  controllerName: %[2]s
  parameters:
    apiGroup: kueue.x-k8s.io
    kind: MultiKueueConfig
    name: workers-%[1]s
---
`, ns, multiKueue) + queue(ns, "dispatch", "dispatch", "elsewhere", "10", "  admissionChecksStrategy:\n    admissionChecks:\n    - name: multikueue-"+ns+"\n")
}

// leavesMultiKueueJobSets: a JobSet sent to a MultiKueue queue gets
// spec.managedBy from Kueue's webhook, and inplace's controller leaves it
// to MultiKueue (no Job, no status) while it runs a JobSet of its own
// created after it. One cluster only: the worker cluster MultiKueue would
// dispatch to is out of this machine's reach beside three real nodes, so
// the dispatch itself is not run.
func leavesMultiKueueJobSets() {
	ns := fw.NewNamespace(ctx, k8sClient)
	createAll(multiKueueQueues(ns.Name))

	By("Kueue's webhook hands a JobSet sent to a MultiKueue queue to MultiKueue")
	dispatched := queuedJobSet("dispatched", ns.Name, "dispatch", "")
	// Kueue defaults managedBy once its cache knows the queue's admission
	// check: a JobSet created before that is deleted and created again.
	Eventually(func(g Gomega) {
		js := dispatched.DeepCopy()
		g.Expect(k8sClient.Create(ctx, js)).To(Succeed())
		if ptr.Deref(js.Spec.ManagedBy, "") != multiKueue {
			g.Expect(k8sClient.Delete(ctx, js)).To(Succeed())
			g.Eventually(func() error { return k8sClient.Get(ctx, client.ObjectKeyFromObject(js), js) }).WithTimeout(30 * time.Second).Should(Satisfy(apierrors.IsNotFound))
		}
		g.Expect(js.Spec.ManagedBy).To(HaveValue(Equal(multiKueue)))
	}).WithTimeout(time.Minute).Should(Succeed())

	By("inplace's controller runs a JobSet of its own created after it, and leaves the first alone")
	ours := util.WorkerJobSet("ours", ns.Name, 1, nil)
	Expect(k8sClient.Create(ctx, ours)).To(Succeed())
	util.ExpectWorkersRunning(ctx, k8sClient, ours, 1, 1, timeout)
	// The dispatched JobSet stays suspended (MultiKueue's admission check
	// never passes on one cluster), so no controller would create its
	// Jobs: the empty status is what shows that inplace leaves it alone.
	Consistently(func(g Gomega) {
		var jobs batchv1.JobList
		g.Expect(k8sClient.List(ctx, &jobs, client.InNamespace(ns.Name), client.MatchingLabels{jobset.JobSetNameKey: dispatched.Name})).To(Succeed())
		g.Expect(jobs.Items).To(BeEmpty(), "no Job of the dispatched JobSet")
		g.Expect(get(dispatched).Status).To(Equal(jobset.JobSetStatus{}), "no status written by inplace")
	}).WithTimeout(5 * time.Second).Should(Succeed())
}
