package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inplace-dev/inplace/test/simnode"
)

// The simulated nodes' latency decides what the restart benchmark measures
// of a Recreate against an in-place restart; the specs here hold it to what
// a node spends.
var _ = Describe("the simulated node", Serial, func() {
	It("reports a Pod without sidecars failed once its only container exits, without the time a running container takes to stop", func() {
		ns := fw.NewNamespace(ctx, k8sClient)
		// A container stop longer than the spec's wait: were it spent on a
		// Pod with nothing left running, the Pod would not fail in time.
		sim.SetLatency(simnode.Latency{ContainerStop: time.Hour})
		DeferCleanup(sim.SetLatency, simnode.Latency{})
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "lone", Namespace: ns.Name},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				NodeSelector:  map[string]string{simnode.NodeLabel: "true"},
				Containers:    []corev1.Container{{Name: "worker", Image: "worker"}},
			},
		}
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithTimeout(timeout).Should(Succeed())

		annotate(*pod, simnode.ExitCodeAnnotation, "1")
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodFailed))
		}).WithTimeout(timeout).Should(Succeed())
		Expect(pod.Status.ContainerStatuses).To(ConsistOf(HaveField("State.Terminated.ExitCode", int32(1))))
	})
})
