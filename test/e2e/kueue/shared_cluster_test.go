package kueue

import (
	"fmt"
	"io"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/decide"
	"github.com/inplace-dev/inplace/test/util"
)

const (
	// timeout bounds what Kueue and the real nodes do for one step.
	timeout = 3 * time.Minute
	// The labels a JobSet's author sets for Kueue.
	queueLabel    = "kueue.x-k8s.io/queue-name"
	priorityLabel = "kueue.x-k8s.io/priority-class"
	// podSetLabel is the label Kueue's admission gives every Pod of a pod
	// set.
	podSetLabel = "kueue.x-k8s.io/podset"
	// workerCPU is what each worker asks for: one JobSet of two fits the
	// ClusterQueue's quota, two do not.
	workerCPU = "400m"
)

// queue is a ClusterQueue named clusterQueue-ns, open to every
// namespace, with a quota of cpu CPUs and 4Gi of memory on the
// ResourceFlavor flavor-ns, the lines of spec added to its spec (each
// indented by two spaces), and the LocalQueue localQueue of ns that sends
// to it. Cluster-scoped names carry ns, as Kueue's own specs name them.
func queue(ns, clusterQueue, localQueue, flavor, cpu, spec string) string {
	return fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: %[2]s-%[1]s
spec:
  namespaceSelector: {}
%[6]s  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: %[4]s-%[1]s
      resources:
      - name: cpu
        nominalQuota: "%[5]s"
      - name: memory
        nominalQuota: 4Gi
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: %[3]s
  namespace: %[1]s
spec:
  clusterQueue: %[2]s-%[1]s
`, ns, clusterQueue, localQueue, flavor, cpu, spec)
}

// queues are the objects of a shared cluster, for namespace ns: one
// ResourceFlavor (a node label every real node has, and a toleration),
// one ClusterQueue that preempts lower priorities within it, with room
// for one JobSet of two workers, the LocalQueue "main", and two
// WorkloadPriorityClasses.
func queues(ns string) string {
	return fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: training-%[1]s
spec:
  nodeLabels:
    kubernetes.io/os: linux
  tolerations:
  - key: example.com/training
    operator: Exists
    effect: NoSchedule
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata:
  name: low-%[1]s
value: 100
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata:
  name: high-%[1]s
value: 1000
---
`, ns) + queue(ns, "team", "main", "training", "1", "  preemption:\n    withinClusterQueue: LowerPriority\n")
}

// createAll creates every object of the YAML documents, each tried until
// Kueue's webhooks answer, and deletes them when the spec ends, in reverse.
func createAll(docs string) []*unstructured.Unstructured {
	GinkgoHelper()
	var objs []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(docs), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			Expect(err).To(MatchError(io.EOF))
			break
		}
		Eventually(func() error { return k8sClient.Create(ctx, obj.DeepCopy()) }).WithTimeout(time.Minute).Should(Succeed(), "creating %s %s", obj.GetKind(), obj.GetName())
		objs = append(objs, obj)
	}
	DeferCleanup(func() {
		for i := len(objs) - 1; i >= 0; i-- {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, objs[i]))).To(Succeed())
		}
	})
	return objs
}

// queuedJobSet is an InPlaceRestart JobSet of two test workers, each
// asking workerCPU, sent to the LocalQueue queue at the given priority
// (none if empty), as its author writes it: Kueue's webhook suspends it.
func queuedJobSet(name, ns, queue, priority string) *jobset.JobSet {
	js := util.WorkerJobSet(name, ns, 2, nil)
	js.Labels = map[string]string{queueLabel: queue}
	if priority != "" {
		js.Labels[priorityLabel] = priority + "-" + ns
	}
	worker := &js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0]
	worker.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(workerCPU), corev1.ResourceMemory: resource.MustParse("64Mi")}
	return js
}

// get is js as stored.
func get(js *jobset.JobSet) *jobset.JobSet {
	GinkgoHelper()
	return util.GetJobSet(ctx, k8sClient, js)
}

// podsOf are js's Pods.
func podsOf(js *jobset.JobSet) []corev1.Pod {
	GinkgoHelper()
	return util.JobSetPods(ctx, k8sClient, js)
}

// expectSuspended waits until js is suspended by Kueue, then until the
// Pods it ran when suspended are gone. Kueue may admit it again before
// they are: its backoff after an eviction runs while the Pods stop, and
// the Pods of the new admission are not waited for.
func expectSuspended(js *jobset.JobSet) {
	GinkgoHelper()
	var ran []string
	Eventually(func(g Gomega) {
		g.Expect(ptr.Deref(get(js).Spec.Suspend, false)).To(BeTrue(), "suspended")
		ran = nil
		for _, p := range podsOf(js) {
			ran = append(ran, p.Name)
		}
	}).WithTimeout(timeout).Should(Succeed())
	Eventually(func(g Gomega) {
		for _, p := range podsOf(js) {
			g.Expect(ran).NotTo(ContainElement(p.Name), "Pod %s of the suspended JobSet is gone", p.Name)
		}
	}).WithTimeout(timeout).Should(Succeed())
}

// expectCounted checks the restarts js counts.
func expectCounted(js *jobset.JobSet, restarts int32) {
	GinkgoHelper()
	got := get(js)
	Expect(got.Status.Restarts).To(Equal(restarts), "restarts")
	Expect(got.Status.RestartsCountTowardsMax).To(Equal(restarts), "restartsCountTowardsMax")
	Expect(got.Status.TerminalState).To(BeEmpty())
}

// expectAssignment checks that every Pod of js carries what Kueue's
// admission wrote into its template: the flavor's node selector and
// toleration, the pod set's label, and any other label, annotation and
// scheduling gate the template holds.
func expectAssignment(js *jobset.JobSet) {
	GinkgoHelper()
	tpl := get(js).Spec.ReplicatedJobs[0].Template.Spec.Template
	Expect(tpl.Spec.NodeSelector).To(HaveKeyWithValue(corev1.LabelOSStable, "linux"), "Kueue wrote the flavor's node labels")
	Expect(tpl.Spec.Tolerations).To(ContainElement(HaveField("Key", "example.com/training")), "Kueue wrote the flavor's toleration")
	Expect(tpl.Labels).To(HaveKeyWithValue(podSetLabel, "workers"), "Kueue wrote the pod set's label")
	pods := podsOf(js)
	Expect(pods).To(HaveLen(2))
	for _, p := range pods {
		for k, v := range tpl.Spec.NodeSelector {
			Expect(p.Spec.NodeSelector).To(HaveKeyWithValue(k, v), "pod %s", p.Name)
		}
		for _, t := range tpl.Spec.Tolerations {
			Expect(p.Spec.Tolerations).To(ContainElement(t), "pod %s", p.Name)
		}
		for k, v := range tpl.Labels {
			Expect(p.Labels).To(HaveKeyWithValue(k, v), "pod %s", p.Name)
		}
		for k, v := range tpl.Annotations {
			Expect(p.Annotations).To(HaveKeyWithValue(k, v), "pod %s", p.Name)
		}
		for _, g := range tpl.Spec.SchedulingGates {
			Expect(p.Spec.SchedulingGates).To(ContainElement(g), "pod %s", p.Name)
		}
	}
}

// expectStatus checks that docs/how-to/kueue.md shows `kubectl inplace
// status` of js and each line of lines (in its namespace team-a), and
// that the command prints them now (in the spec's namespace, ns).
func expectStatus(js *jobset.JobSet, ns string, lines ...string) {
	GinkgoHelper()
	command := "kubectl inplace status " + js.Name
	doc := page()
	Expect(doc).To(ContainSubstring(command), "docs/how-to/kueue.md shows the command")
	out := strings.ReplaceAll(inplaceStatus(js.Name, ns), ns+"/", "team-a/")
	for _, l := range lines {
		Expect(doc).To(ContainSubstring(l), "docs/how-to/kueue.md shows what %q prints", command)
		Expect(out).To(ContainSubstring(l), "%q prints what docs/how-to/kueue.md shows", command)
	}
}

// completeWorkers makes every worker of js exit 0 and waits for js to
// complete.
func completeWorkers(js *jobset.JobSet) {
	GinkgoHelper()
	for _, p := range podsOf(js) {
		util.ExitWorker(ctx, fw.Cluster.Kubeconfig, p, 0)
	}
	util.ExpectJobSetCondition(ctx, k8sClient, js, jobset.JobSetCompleted, decide.ReasonAllJobsCompleted, timeout)
}

// preemptsAndResumes: a low-priority JobSet admitted and running is
// preempted by a high-priority one, and resumed once that one completes.
func preemptsAndResumes() {
	ns := fw.NewNamespace(ctx, k8sClient)
	createAll(queues(ns.Name))

	By("a low-priority JobSet is admitted and runs")
	low := queuedJobSet("low", ns.Name, "main", "low")
	Eventually(func() error { return k8sClient.Create(ctx, low) }).WithTimeout(time.Minute).Should(Succeed())
	util.ExpectWorkersRunning(ctx, k8sClient, low, 2, 1, timeout)
	expectAssignment(low)

	By("a high-priority JobSet preempts it: suspended, its Pods gone, no restart counted")
	high := queuedJobSet("high", ns.Name, "main", "high")
	Expect(k8sClient.Create(ctx, high)).To(Succeed())
	expectSuspended(low)
	expectCounted(low, 0)
	expectStatus(low, ns.Name,
		"JobSet team-a/low  strategy InPlaceRestart  state Suspended",
		"restarts 0 (0 in place; 0 of maxRestarts 3 counted)",
		"epochs   synced 1  deprecated 1",
		"workers         0     0                0      held: suspended")
	util.ExpectWorkersRunning(ctx, k8sClient, high, 2, 1, timeout)

	By("the high-priority JobSet completes")
	completeWorkers(high)

	By("the low-priority JobSet is resumed with its pod set assignment on every Pod")
	before := util.ExpectWorkersRunning(ctx, k8sClient, low, 2, 2, timeout)
	expectAssignment(low)
	expectCounted(low, 0)
	expectStatus(low, ns.Name,
		"JobSet team-a/low  strategy InPlaceRestart  state Active (Running)",
		"restarts 0 (0 in place; 0 of maxRestarts 3 counted)",
		"epochs   synced 2  deprecated 1",
		"workers         2     2                2      lifted")

	By("a worker exits: every Pod restarts in place, one restart counted")
	util.ExitWorker(ctx, fw.Cluster.Kubeconfig, podsOf(low)[0], 1)
	Expect(util.ExpectWorkersRunning(ctx, k8sClient, low, 2, 3, timeout)).To(Equal(before), "the same Pods, on the same nodes")
	expectCounted(low, 1)
	expectStatus(low, ns.Name,
		"restarts 1 (1 in place; 1 of maxRestarts 3 counted)",
		"epochs   synced 3  deprecated 2")

	By("it completes")
	completeWorkers(low)
}
