package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inplace-dev/inplace/test/simnode"
)

// The simulated nodes' latency decides what the restart benchmark measures
// of a Recreate against an in-place restart; the spec holds it to what a
// node spends.
var _ = Describe("the simulated node", Serial, func() {
	It("spends the time containers take to stop only on a Pod that has some left running when its workers exit", func() {
		ns := fw.NewNamespace(ctx, k8sClient)
		// Longer than any report of a Pod's end takes here.
		const stop = 20 * time.Second
		previous := sim.SetLatency(simnode.Latency{ContainerStop: stop})
		DeferCleanup(func() { sim.SetLatency(previous) })

		lone := failingPod("lone", ns.Name)
		withSidecar := failingPod("with-sidecar", ns.Name)
		withSidecar.Spec.InitContainers = []corev1.Container{{Name: "sidecar", Image: "sidecar", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}
		for _, p := range []*corev1.Pod{lone, withSidecar} {
			Expect(k8sClient.Create(ctx, p)).To(Succeed())
			Eventually(phaseOf(p)).WithTimeout(timeout).Should(Equal(corev1.PodRunning))
		}

		exited := time.Now()
		annotate(*lone, simnode.ExitCodeAnnotation, "1")
		annotate(*withSidecar, simnode.ExitCodeAnnotation, "1")
		// Nothing left to stop: reported failed without the stop time.
		Eventually(phaseOf(lone)).WithTimeout(stop).Should(Equal(corev1.PodFailed))
		Expect(time.Since(exited)).To(BeNumerically("<", stop), "the Pod without sidecars waited for a stop")
		Expect(phaseOf(withSidecar)(Default)).To(Equal(corev1.PodRunning), "the Pod with a running sidecar did not wait for it to stop")
		// Its sidecar still running: failed only once it has stopped.
		Eventually(phaseOf(withSidecar)).WithTimeout(stop + timeout).Should(Equal(corev1.PodFailed))
		Expect(time.Since(exited)).To(BeNumerically(">=", stop), "the Pod with a running sidecar failed before the sidecar could stop")
		Expect(lone.Status.ContainerStatuses).To(ConsistOf(HaveField("State.Terminated.ExitCode", int32(1))))
		// The sandbox's end reported, as the real kubelet reports it.
		Expect(lone.Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.PodReadyToStartContainers), HaveField("Status", corev1.ConditionFalse))))
	})
})

// failingPod is a Pod of one worker that fails when it exits 1, on any
// simulated node.
func failingPod(name, namespace string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			NodeSelector:  map[string]string{simnode.NodeLabel: "true"},
			Containers:    []corev1.Container{{Name: "worker", Image: "worker"}},
		},
	}
}

// phaseOf reads a Pod's phase, keeping what it read in pod.
func phaseOf(pod *corev1.Pod) func(Gomega) corev1.PodPhase {
	return func(g Gomega) corev1.PodPhase {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		return pod.Status.Phase
	}
}
