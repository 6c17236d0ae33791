package webhookauth

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	"github.com/inplace-dev/inplace/test/framework"
	"github.com/inplace-dev/inplace/webhook/certs"
)

const clientCAName = "apiserver-client-ca.crt"

var (
	fw        *framework.Framework
	cfg       *rest.Config
	ctx       context.Context
	k8sClient client.Client
	// clientCA signs the apiserver's client certificate; the tests sign
	// others with it, or with another CA, to knock on the webhook.
	clientCA *certs.CA
)

func TestWebhookAuthentication(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "Webhook client authentication")
}

// admissionConfig makes the apiserver present cert and key to every
// webhook it calls ("*"), for both webhook admission plugins.
func admissionConfig(dir string, cert, key []byte) string {
	GinkgoHelper()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		Expect(os.WriteFile(p, data, 0o600)).To(Succeed())
		return p
	}
	certFile, keyFile := write("client.crt", cert), write("client.key", key)
	kubeconfig := write("webhook-kubeconfig.yaml", fmt.Appendf(nil, `apiVersion: v1
kind: Config
users:
- name: "*"
  user:
    client-certificate: %s
    client-key: %s
`, certFile, keyFile))
	plugin := func(name string) string {
		return fmt.Sprintf(`- name: %s
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %s
`, name, kubeconfig)
	}
	return write("admission.yaml", []byte("apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n"+
		plugin("ValidatingAdmissionWebhook")+plugin("MutatingAdmissionWebhook")))
}

var _ = BeforeSuite(func() {
	dir := GinkgoT().TempDir()
	var err error
	clientCA, err = certs.NewCA("apiserver-client-ca")
	Expect(err).NotTo(HaveOccurred())
	cert, key, err := clientCA.Sign(certs.Leaf{CommonName: "kube-apiserver", Client: true})
	Expect(err).NotTo(HaveOccurred())
	fw = &framework.Framework{
		Name:           "integration-webhookauth",
		Webhooks:       true,
		APIServerFlags: map[string]string{"admission-control-config-file": admissionConfig(dir, cert, key)},
		Configure: func(c *configv1alpha1.Configuration) {
			Expect(os.WriteFile(filepath.Join(c.Webhook.CertDir, clientCAName), clientCA.PEM, 0o600)).To(Succeed())
			c.Webhook.ClientCAName = clientCAName
		},
	}
	cfg = fw.Init()
	ctx, k8sClient = fw.SetupClient(cfg)
	fw.StartManager(cfg)
})

var _ = AfterSuite(func() {
	fw.Teardown()
})
