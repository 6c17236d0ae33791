package realnode

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/util"
)

var _ = inScopes(func(scope string) {
	Describe("in-place restart on real kubelets, a fatal exit beside a running container ("+scope+" scope)", func() {
		var ns *corev1.Namespace
		BeforeEach(func() { ns = specNamespace() })

		// The kubelet fails a Pod only once every regular container has ended:
		// with a second worker still running, the fatal exit alone would leave
		// the Pod Running, its Job and the JobSet waiting for good.
		It("fails the JobSet by its failure policy, without an in-place restart", func() {
			js := util.SetRestartScope(fatalExitJobSet("fatal-two", ns.Name), scope)
			pod := &js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
			sampler := *pod.Containers[0].DeepCopy()
			sampler.Name = "sampler"
			pod.Containers = append(pod.Containers, sampler)
			Expect(k8sClient.Create(ctx, js)).To(Succeed())
			expectRunning(js, 1)

			victim := podsOf(js)[0]
			exitWorker(victim, 3)
			got := util.ExpectJobSetCondition(ctx, k8sClient, js, jobset.JobSetFailed, "FailJobSetFailurePolicyAction", timeout)
			Expect(got.Status.InPlaceRestarts).To(BeZero(), "the fatal exit started an in-place restart")
			Expect(got.Status.DeprecatedEpoch).To(BeZero(), "an epoch was deprecated for a fatal exit")
			var events corev1.EventList
			Expect(k8sClient.List(ctx, &events, client.InNamespace(ns.Name))).To(Succeed())
			Expect(events.Items).To(ContainElement(And(
				HaveField("Reason", "FatalExitPodDeleted"), HaveField("Message", ContainSubstring("Pod "+victim.Name)))))
		})
	})
})
