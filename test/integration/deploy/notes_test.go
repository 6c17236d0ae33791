package deploy

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/inplace-dev/inplace/test/framework"
)

// notes renders the chart's NOTES.txt as helm install prints it; a
// client-side dry run asks the apiserver only for its version.
func notes(args ...string) string {
	GinkgoHelper()
	out, err := run(tool("HELM", "helm"), append([]string{"install", "inplace", "charts/inplace",
		"--namespace", "inplace-system", "--dry-run=client", "--kubeconfig", framework.WriteKubeconfig(cfg)}, args...)...)
	Expect(err).NotTo(HaveOccurred())
	_, after, found := strings.Cut(string(out), "NOTES:")
	Expect(found).To(BeTrue(), "helm install printed no notes")
	return after
}

var _ = Describe("the chart's notes", func() {
	It("say what was installed, how to check it, and where to start", func() {
		out := notes()
		Expect(out).To(ContainSubstring("kubectl -n inplace-system get deploy"))
		Expect(out).To(ContainSubstring("kubectl get jobsetpolicies"))
		Expect(out).To(ContainSubstring("docs/explanation/in-place-restart.md"))
		Expect(out).To(ContainSubstring("inplace.dev/webhooks=disabled"))
		Expect(out).To(ContainSubstring("kubectl apply --server-side --force-conflicts -f crds/"), "the CRDs' upgrade, which Helm does not do")
		Expect(out).NotTo(ContainSubstring("WARNING"))
	})

	It("warn about self-signed certificates without cert-manager", func() {
		Expect(notes("--set", "certManager.enabled=false,webhook.replicas=1")).To(ContainSubstring("WARNING: certManager.enabled=false"))
	})

	It("warn about one replica of the admission server", func() {
		Expect(notes("--set", "webhook.replicas=1")).To(ContainSubstring("WARNING: webhook.replicas=1"))
	})
})
