package faults

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/inplace-dev/inplace/test/deploy"
	"github.com/inplace-dev/inplace/test/framework"
	"github.com/inplace-dev/inplace/test/simnode"
)

// timeout bounds each wait: a restart across a control-plane restart
// converges in seconds, a loaded machine takes several times as long.
const timeout = 90 * time.Second

var (
	// The managers as installed, each as its service account, with
	// their webhooks. Without leader election: a leader that cannot
	// renew its Lease for its renew deadline (10 s) exits, as it must,
	// and its Deployment starts it again; here no Deployment would.
	fw        = &framework.Framework{Name: "e2e-faults", FullCluster: true, Webhooks: true}
	cfg       *rest.Config
	ctx       context.Context
	k8sClient client.Client
	sim       *simnode.Sim
	// recorder holds what the simulated nodes did, and when.
	recorder = &simnode.Recorder{}
)

func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local cluster")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "Control-plane faults")
}

var _ = BeforeSuite(func() {
	cfg = fw.Init()
	ctx, k8sClient = fw.SetupClient(cfg)
	fw.StartManager(cfg)
	Expect(deploy.ApplyKustomization(ctx, k8sClient, deploy.AgentPolicy)).To(Succeed())
	var err error
	sim, err = simnode.Start(ctx, simnode.Options{
		Client:         kubernetes.NewForConfigOrDie(cfg),
		Nodes:          4,
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
})
