package framework

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	"github.com/inplace-dev/inplace/test/deploy"
)

// setupWebhooks points the manager's webhook server at a fixed local port
// with self-signed certificates, and registers the webhook configurations
// of config/webhook with the apiserver, calling that port by URL instead of
// through a Service. The rules, scope and failure policy are the shipped
// ones.
func (f *Framework) setupWebhooks(cfg *rest.Config, conf *configv1alpha1.Configuration) {
	ginkgo.GinkgoHelper()
	if f.webhookPort == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		f.webhookPort = l.Addr().(*net.TCPAddr).Port
		gomega.Expect(l.Close()).To(gomega.Succeed())
		f.webhookDir, err = os.MkdirTemp("", "inplace-webhook-")
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		ginkgo.DeferCleanup(os.RemoveAll, f.webhookDir)
		f.registerWebhooks(cfg)
	}
	conf.Webhook.Port = f.webhookPort
	conf.Webhook.CertDir = f.webhookDir
	conf.Webhook.SelfSignedCerts = true
	conf.Webhook.Hosts = []string{"127.0.0.1", "localhost"}
}

func (f *Framework) registerWebhooks(cfg *rest.Config) {
	ginkgo.GinkgoHelper()
	c, err := client.New(cfg, client.Options{Scheme: Scheme})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	gomega.Expect(deploy.RegisterWebhooks(context.Background(), c, f.webhookPort)).To(gomega.Succeed())
}

// waitForWebhooks waits until the apiserver reaches both webhooks over TLS
// and they admit.
func (f *Framework) waitForWebhooks(cfg *rest.Config) {
	ginkgo.GinkgoHelper()
	c, err := client.New(cfg, client.Options{Scheme: Scheme})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	gomega.Expect(deploy.WaitForWebhooks(context.Background(), c, 30*time.Second)).To(gomega.Succeed())
}

// WebhookURL is the address at which the manager StartManager started
// serves the webhook of path, as the apiserver calls it.
func (f *Framework) WebhookURL(path string) string {
	return fmt.Sprintf("https://127.0.0.1:%d%s", f.webhookPort, path)
}
