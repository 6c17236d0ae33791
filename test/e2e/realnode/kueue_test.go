package realnode

import (
	"runtime"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/util"
)

// Kueue's protocol on real kubelets, played from its documented behaviour
// (the tests do not run Kueue's controller): admission writes a flavor's node
// selector and tolerations into the Pod templates and unsuspends in one
// update; preemption suspends and restores the templates in one update.
var _ = Describe("in-place restart on real kubelets, under Kueue", func() {
	var ns *corev1.Namespace
	BeforeEach(func() { ns = specNamespace() })

	update := func(js *jobset.JobSet, change func(*jobset.JobSet)) {
		GinkgoHelper()
		util.UpdateJobSet(ctx, k8sClient, js, change)
	}
	// Every real node carries both labels: each flavor admits anywhere, and
	// the Pods show which one they were started with.
	flavors := map[string]map[string]string{
		"a": {corev1.LabelOSStable: "linux"},
		"b": {corev1.LabelArchStable: runtime.GOARCH},
	}
	admit := func(js *jobset.JobSet, flavor string) {
		GinkgoHelper()
		update(js, func(js *jobset.JobSet) {
			tpl := &js.Spec.ReplicatedJobs[0].Template.Spec.Template
			tpl.Spec.NodeSelector = flavors[flavor]
			tpl.Spec.Tolerations = []corev1.Toleration{{Key: "flavor-" + flavor, Operator: corev1.TolerationOpExists}}
			js.Spec.Suspend = ptr.To(false)
		})
	}
	preempt := func(js *jobset.JobSet) {
		GinkgoHelper()
		update(js, func(js *jobset.JobSet) {
			js.Spec.Suspend = ptr.To(true)
			tpl := &js.Spec.ReplicatedJobs[0].Template.Spec.Template
			tpl.Spec.NodeSelector, tpl.Spec.Tolerations = nil, nil
		})
	}
	expectFlavor := func(js *jobset.JobSet, flavor string) {
		GinkgoHelper()
		for _, p := range podsOf(js) {
			Expect(p.Spec.NodeSelector).To(Equal(flavors[flavor]), "pod %s", p.Name)
			Expect(p.Spec.Tolerations).To(ContainElement(HaveField("Key", "flavor-"+flavor)), "pod %s", p.Name)
		}
	}
	expectCounted := func(js *jobset.JobSet, restarts int32) {
		GinkgoHelper()
		got := getJobSet(js)
		Expect(got.Status.Restarts).To(Equal(restarts), "restarts")
		Expect(got.Status.RestartsCountTowardsMax).To(Equal(restarts), "restartsCountTowardsMax")
		Expect(got.Status.TerminalState).To(BeEmpty())
	}

	It("a preemption counts no restart, the next admission's directives reach the Pods, and a later failure still restarts in place", func() {
		js := workerJobSet("kueue", ns.Name, nil)
		js.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "team-a"}
		js.Spec.Suspend = ptr.To(true)
		js.Spec.FailurePolicy.MaxRestarts = 1
		Expect(k8sClient.Create(ctx, js)).To(Succeed())

		By("admitted to flavor a")
		admit(js, "a")
		expectRunning(js, 1)
		expectFlavor(js, "a")

		By("preempted: every Pod stops, nothing is counted")
		preempt(js)
		Eventually(func(g Gomega) {
			g.Expect(podsOf(js)).To(BeEmpty())
		}).WithTimeout(timeout).Should(Succeed())
		expectCounted(js, 0)

		By("admitted to flavor b: a fresh epoch syncs on Pods with b's directives")
		admit(js, "b")
		before := expectRunning(js, 2)
		expectFlavor(js, "b")
		expectCounted(js, 0)

		By("a worker exits: every Pod restarts in place, one restart counted")
		exitWorker(podsOf(js)[0], 1)
		Expect(expectRunning(js, 3)).To(Equal(before), "the same Pods, on the same nodes")
		expectCounted(js, 1)
	})
})
