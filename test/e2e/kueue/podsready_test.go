package kueue

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/images"
	kueueinstall "github.com/inplace-dev/inplace/test/kueue"
	"github.com/inplace-dev/inplace/test/util"
)

// recoveryTimeout is how long Kueue lets an admitted Workload's Pods be
// unready once they were ready: longer than an in-place restart takes
// here, short enough to wait out.
const recoveryTimeout = 30 * time.Second

// waitForPodsReady is the Configuration's section these specs run with,
// appended to config/default's own: a Workload is evicted if its Pods are
// not ready within 5 minutes of admission or, once ready, stay unready
// past recoveryTimeout, and requeued after a 30 s backoff (the evicted
// JobSet's Pods may still be stopping when Kueue admits it again).
var waitForPodsReady = fmt.Sprintf(`waitForPodsReady:
  timeout: 5m
  recoveryTimeout: %s
  blockAdmission: false
  requeuingStrategy:
    timestamp: Eviction
    backoffBaseSeconds: 30
    backoffMaxSeconds: 30
`, recoveryTimeout)

// kueueConfigFile is config/default's Configuration in Kueue's module.
const kueueConfigFile = "config/components/manager/controller_manager_config.yaml"

// restartKueueWithWaitForPodsReady applies Kueue's manifests again with
// waitForPodsReady in its Configuration and restarts it: Kueue reads its
// Configuration when it starts.
func restartKueueWithWaitForPodsReady() {
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	dir, err := kueueinstall.Module.Dir(ctx, root)
	Expect(err).NotTo(HaveOccurred())
	config, err := os.ReadFile(filepath.Join(dir, kueueConfigFile))
	Expect(err).NotTo(HaveOccurred())
	manifests, err := kueueinstall.Manifests(ctx, root, GinkgoT().TempDir(), string(config)+waitForPodsReady)
	Expect(err).NotTo(HaveOccurred())
	Expect(pageBlocks("yaml")).To(ContainElement(waitForPodsReady), "docs/how-to/kueue.md shows the configuration")
	out, err := fw.Run(ctx, time.Minute, nil, "kubectl", "apply", "--server-side", "-f", manifests)
	Expect(err).NotTo(HaveOccurred(), out)
	for _, line := range []string{kueueRestart, kueueRollout} {
		Expect(page()).To(ContainSubstring(line), "docs/how-to/kueue.md shows the command")
		out, err := fw.Run(ctx, 3*time.Minute, nil, "sh", "-c", line)
		Expect(err).NotTo(HaveOccurred(), out)
	}
}

// kueueRestart restarts Kueue, as docs/how-to/kueue.md shows it.
const kueueRestart = "kubectl -n kueue-system rollout restart deployment/kueue-controller-manager"

// readyQueues are a ClusterQueue and a LocalQueue "ready" for namespace
// ns, on one ResourceFlavor.
func readyQueues(ns string) string {
	return fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: ready-%[1]s
---
`, ns) + queue(ns, "ready", "ready", "ready", "4", "")
}

// readyAfter is how long a probed worker is unready after it starts, as
// a worker loading its data: every restart makes its Pod unready for
// that long at least, in process scope too.
const readyAfter = "5"

// probedJobSet is a queued JobSet whose workers are ready readyAfter
// seconds after they start, while the test worker says so (a readiness
// probe every second).
func probedJobSet(name, ns string) *jobset.JobSet {
	js := queuedJobSet(name, ns, "ready", "")
	worker := &js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0]
	worker.Env = append(worker.Env, corev1.EnvVar{Name: "READY_AFTER_SECONDS", Value: readyAfter})
	worker.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{images.WorkerBinary, "ready"}}},
		PeriodSeconds: 1, FailureThreshold: 1,
	}
	return js
}

// workloadOf is the Workload Kueue made for js; g fails if there is none.
func workloadOf(g Gomega, js *jobset.JobSet) *unstructured.Unstructured {
	var list unstructured.UnstructuredList
	list.SetAPIVersion("kueue.x-k8s.io/v1beta2")
	list.SetKind("WorkloadList")
	g.Expect(k8sClient.List(ctx, &list, client.InNamespace(js.Namespace))).To(Succeed())
	uid := get(js).UID
	var owned []unstructured.Unstructured
	for _, wl := range list.Items {
		if slices.ContainsFunc(wl.GetOwnerReferences(), func(ref metav1.OwnerReference) bool { return ref.UID == uid }) {
			owned = append(owned, wl)
		}
	}
	g.Expect(owned).NotTo(BeEmpty(), "no Workload of %s among the %d of its namespace", js.Name, len(list.Items))
	return &owned[0]
}

// workloadCondition is the condition of type t of js's Workload, nil if
// it has none.
func workloadCondition(g Gomega, js *jobset.JobSet, t string) *metav1.Condition {
	wl := workloadOf(g, js)
	conds, err := util.Conditions(wl)
	g.Expect(err).NotTo(HaveOccurred())
	return meta.FindStatusCondition(conds, t)
}

// expectPodsReady waits until js's Workload's PodsReady condition has
// status.
func expectPodsReady(js *jobset.JobSet, status metav1.ConditionStatus) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		c := workloadCondition(g, js, "PodsReady")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(status))
	}).WithTimeout(timeout).WithPolling(250 * time.Millisecond).Should(Succeed())
}

// survivesRecoveryTimeout: an in-place restart, in container and in
// process scope, leaves the Pods unready for less than recoveryTimeout,
// and Kueue evicts neither JobSet.
func survivesRecoveryTimeout() {
	ns := fw.NewNamespace(ctx, k8sClient)
	createAll(readyQueues(ns.Name))
	jobSets := []*jobset.JobSet{
		probedJobSet("container", ns.Name),
		util.SetRestartScope(probedJobSet("process", ns.Name), protocol.RestartScopeProcess),
	}
	before := map[string]map[string]util.PodIdentity{}
	for _, js := range jobSets {
		Expect(k8sClient.Create(ctx, js)).To(Succeed())
	}
	for _, js := range jobSets {
		before[js.Name] = util.ExpectWorkersRunning(ctx, k8sClient, js, 2, 1, timeout)
		expectPodsReady(js, metav1.ConditionTrue)
	}

	By("a worker of each exits: each restarts in place, its Pods unready, then ready again")
	for _, js := range jobSets {
		util.ExitWorker(ctx, fw.Cluster.Kubeconfig, podsOf(js)[0], 1)
	}
	// Every restarted worker is unready for readyAfter seconds at least.
	// Whether Kueue sees it depends on when its Job's readiness drops.
	// Before the new epoch syncs, the status write that ends the restart
	// carries it: the Workload's PodsReady turns False and Kueue's
	// recovery timer runs. After it, the controller holds a change of
	// counters alone while the group recovers (decide.HoldCounters), and
	// the group is ready again before the hold ends: Kueue never sees
	// the drop. Both happen, in container scope as in process scope;
	// neither evicts.
	for _, js := range jobSets {
		Expect(util.ExpectWorkersRunning(ctx, k8sClient, js, 2, 2, timeout)).To(Equal(before[js.Name]), "%s: the same Pods, on the same nodes", js.Name)
		expectPodsReady(js, metav1.ConditionTrue)
		expectCounted(js, 1)
	}

	By(fmt.Sprintf("neither is evicted past the recoveryTimeout (%s)", recoveryTimeout))
	Consistently(func(g Gomega) {
		for _, js := range jobSets {
			g.Expect(ptr.Deref(get(js).Spec.Suspend, false)).To(BeFalse(), "%s runs", js.Name)
			c := workloadCondition(g, js, "Evicted")
			g.Expect(c == nil || c.Status != metav1.ConditionTrue).To(BeTrue(), "%s's Workload is not evicted: %v", js.Name, c)
		}
	}).WithTimeout(recoveryTimeout + 10*time.Second).WithPolling(time.Second).Should(Succeed())
}

// evictsUnreadyJobSet: a Pod that stays unready past recoveryTimeout has
// Kueue evict the Workload: the JobSet is suspended, its Pods go, no
// restart is counted, and after the backoff it is admitted again on new
// Pods.
func evictsUnreadyJobSet() {
	ns := fw.NewNamespace(ctx, k8sClient)
	createAll(readyQueues(ns.Name))
	js := probedJobSet("stuck", ns.Name)
	Expect(k8sClient.Create(ctx, js)).To(Succeed())
	before := util.ExpectWorkersRunning(ctx, k8sClient, js, 2, 1, timeout)
	expectPodsReady(js, metav1.ConditionTrue)

	By("a worker stays unready, as one stuck loading its data")
	pod := podsOf(js)[0]
	out, err := fw.Run(ctx, 30*time.Second, nil, "kubectl", "exec", "-n", ns.Name, pod.Name, "-c", "worker", "--", images.WorkerBinary, "unready")
	Expect(err).NotTo(HaveOccurred(), out)

	By("Kueue evicts its Workload past the recoveryTimeout: suspended, its Pods gone, no restart counted")
	Eventually(func(g Gomega) {
		c := workloadCondition(g, js, "Evicted")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal("PodsReadyTimeout"))
	}).WithTimeout(recoveryTimeout + timeout).Should(Succeed())
	expectSuspended(js)
	expectCounted(js, 0)

	By("admitted again after the backoff: new Pods, ready")
	after := util.ExpectWorkersRunning(ctx, k8sClient, js, 2, 2, timeout)
	for name := range after {
		Expect(before).NotTo(HaveKey(name), "pod %s is new", name)
	}
	expectPodsReady(js, metav1.ConditionTrue)
	expectCounted(js, 0)
}
