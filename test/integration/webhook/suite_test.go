// Package webhook tests admission end to end: the real kube-apiserver calls
// the manager's webhooks over TLS, as registered by config/webhook, and the
// JobSetPolicy controller keeps the policy engine in step.
package webhook

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	"github.com/inplace-dev/inplace/test/framework"
)

// evaluationTimeout is the policies' time limit in this suite.
const evaluationTimeout = 3 * time.Second

var (
	fw = &framework.Framework{
		Name:     "integration-webhook",
		Webhooks: true,
		Configure: func(c *configv1alpha1.Configuration) {
			// The agent as the in-place restart KEP's manifests describe it.
			c.Agent.ContainerName = "agent"
			c.Agent.BarrierPort = 8080
			c.Agent.BarrierTimeoutSeconds = 600
			c.Policies.AuditInterval = &metav1.Duration{Duration: time.Second}
			// A policy that overflows the stack takes about a second to
			// reach the evaluator's 64 MB under the race detector: within
			// the default time limit (1s) on a loaded machine the limit,
			// not the overflow, ended it.
			c.Policies.EvaluationTimeout = &metav1.Duration{Duration: evaluationTimeout}
		},
	}
	cfg       *rest.Config
	ctx       context.Context
	k8sClient client.Client
)

func TestWebhook(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "Admission webhooks")
}

var _ = BeforeSuite(func() {
	cfg = fw.Init()
	ctx, k8sClient = fw.SetupClient(cfg)
	fw.StartManager(cfg)
})

var _ = AfterSuite(func() {
	fw.Teardown()
})
