package kueue

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/util"
)

const (
	// blockLabel is the topology level above the node, as Kueue's own TAS
	// specs name it: labelNodes puts two real nodes in block b1 and the
	// third in b2.
	blockLabel = "cloud.provider.com/topology-block"
	// The annotation that asks Kueue for one domain of a level, and the
	// scheduling gate Kueue's admission adds until it places a Pod.
	requiredTopology = "kueue.x-k8s.io/podset-required-topology"
	topologyGate     = "kueue.x-k8s.io/topology"
)

// blocks is the block of each real node, by index.
var blocks = []string{"b1", "b1", "b2"}

// topologyQueues are the objects of topology-aware scheduling for
// namespace ns: a Topology of blocks and nodes, a ResourceFlavor on it,
// a ClusterQueue and a LocalQueue "tas".
func topologyQueues(ns string) string {
	return fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata:
  name: blocks-%[1]s
spec:
  levels:
  - nodeLabel: %[2]s
  - nodeLabel: kubernetes.io/hostname
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: tas-%[1]s
spec:
  nodeLabels:
    kubernetes.io/os: linux
  topologyName: blocks-%[1]s
---
`, ns, blockLabel) + queue(ns, "tas", "tas", "tas", "4", "")
}

// keepsTopologyAssignment: a JobSet that requires one block gets every
// Pod placed by Kueue in one block's nodes, and keeps them there through
// an in-place restart.
func keepsTopologyAssignment() {
	ns := fw.NewNamespace(ctx, k8sClient)
	createAll(topologyQueues(ns.Name))

	js := queuedJobSet("placed", ns.Name, "tas", "")
	js.Spec.ReplicatedJobs[0].Template.Spec.Template.Annotations = map[string]string{requiredTopology: blockLabel}
	Expect(k8sClient.Create(ctx, js)).To(Succeed())

	By("Kueue admits it to one block: its template gated, its Pods placed and ungated")
	before := util.ExpectWorkersRunning(ctx, k8sClient, js, 2, 1, timeout)
	Expect(get(js).Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.SchedulingGates).To(ContainElement(HaveField("Name", topologyGate)),
		"Kueue's admission gates the Pods until it places them")
	var workloads unstructured.UnstructuredList
	workloads.SetAPIVersion("kueue.x-k8s.io/v1beta2")
	workloads.SetKind("WorkloadList")
	Expect(k8sClient.List(ctx, &workloads, client.InNamespace(ns.Name))).To(Succeed())
	Expect(workloads.Items).To(HaveLen(1))
	assignments, _, _ := unstructured.NestedSlice(workloads.Items[0].Object, "status", "admission", "podSetAssignments")
	Expect(assignments).To(HaveLen(1))
	Expect(assignments[0]).To(HaveKey("topologyAssignment"), "the Workload holds a topology assignment")
	expectOneBlock(js)

	By("a worker exits: every Pod restarts in place, in the same domain")
	util.ExitWorker(ctx, fw.Cluster.Kubeconfig, podsOf(js)[0], 1)
	Expect(util.ExpectWorkersRunning(ctx, k8sClient, js, 2, 2, timeout)).To(Equal(before), "the same Pods, on the same nodes")
	expectOneBlock(js)
	expectCounted(js, 1)
}

// expectOneBlock checks that every Pod of js is ungated, selects the node
// Kueue assigned it by hostname, and runs there, all in one block.
func expectOneBlock(js *jobset.JobSet) {
	GinkgoHelper()
	block := ""
	for _, p := range podsOf(js) {
		Expect(p.Spec.SchedulingGates).To(BeEmpty(), "pod %s: Kueue ungated it", p.Name)
		Expect(p.Spec.NodeSelector).To(HaveKeyWithValue(corev1.LabelHostname, p.Spec.NodeName), "pod %s runs on the node Kueue assigned it", p.Name)
		var node corev1.Node
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &node)).To(Succeed())
		Expect(node.Labels).To(HaveKey(blockLabel))
		if block == "" {
			block = node.Labels[blockLabel]
		}
		Expect(node.Labels[blockLabel]).To(Equal(block), "pod %s is in the block of the others", p.Name)
	}
}
