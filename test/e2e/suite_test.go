// Package e2e runs in-place restarts end to end on the local cluster: the
// real manager with its webhooks over TLS, the real Job controller and
// scheduler, and simulated nodes that run the real agent in every Pod.
package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	"github.com/inplace-dev/inplace/test/deploy"
	"github.com/inplace-dev/inplace/test/framework"
	"github.com/inplace-dev/inplace/test/simnode"
	"github.com/inplace-dev/inplace/test/util"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
)

var (
	// The managers run as installed: two of them, each as its service
	// account, electing their leaders, serving their metrics behind
	// authentication; the apiserver enforces the owner references'
	// permissions (as some clusters do) and records the managers' calls,
	// which rbac_test.go compares with their Roles.
	fw = &framework.Framework{Name: "e2e", FullCluster: true, Webhooks: true, LeaderElection: true, ServeMetrics: true, PolicyReports: true,
		Configure: func(c *configv1alpha1.Configuration) {
			// Restarts here converge in about two seconds (ten on a loaded
			// machine); the fallback spec waits this long for one that cannot.
			c.Controller.InPlaceRestartTimeout = &metav1.Duration{Duration: 20 * time.Second}
			// The audit writes its findings into the policies' status.
			c.Policies.AuditInterval = &metav1.Duration{Duration: 2 * time.Second}
		},
	}
	auditDir  string
	cfg       *rest.Config
	ctx       context.Context
	k8sClient client.Client
	// recorder holds what the simulated nodes saw, for the timing
	// assertions of the protocol.
	recorder = &simnode.Recorder{}
	sim      *simnode.Sim
)

func TestE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local cluster")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "In-place restart end to end")
}

var _ = BeforeSuite(func() {
	var err error
	auditDir, err = os.MkdirTemp("", "inplace-e2e-audit-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, auditDir)
	// The managers' calls and the agents'.
	fw.APIServerFlags, err = util.AuditFlags(auditDir, serviceaccount.AllServiceAccountsGroup)
	Expect(err).NotTo(HaveOccurred())
	fw.APIServerFlags["enable-admission-plugins"] = "OwnerReferencesPermissionEnforcement"
	cfg = fw.Init()
	ctx, k8sClient = fw.SetupClient(cfg)
	fw.StartManager(cfg)
	// Agents run as their Pods, under the admission policy that limits
	// them to their own epoch annotation.
	Expect(deploy.ApplyKustomization(ctx, k8sClient, deploy.AgentPolicy)).To(Succeed())
	sim, err = simnode.Start(ctx, simnode.Options{
		Client:         kubernetes.NewForConfigOrDie(cfg),
		Nodes:          8,
		Prefix:         "sim",
		AgentContainer: "inplace-agent",
		AgentConfig:    cfg,
		Recorder:       recorder,
		Log:            zap.New(zap.WriteTo(GinkgoWriter)),
	})
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	fw.Teardown()
	// No call of the managers, in any spec, was refused by authorization.
	if auditDir != "" {
		calls, err := util.ReadCalls(util.AuditLog(auditDir))
		Expect(err).NotTo(HaveOccurred())
		for _, user := range []string{controllerUser, webhookUser} {
			Expect(util.Denied(util.CallsOf(calls, user))).To(BeEmpty(), "%s: calls its Roles do not grant", user)
		}
	}
})
