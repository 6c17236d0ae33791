package realnode

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/deploy"
	"github.com/inplace-dev/inplace/test/framework"
	"github.com/inplace-dev/inplace/test/images"
)

// nodes is how many real nodes the suite runs: one worker Pod per node.
const nodes = 2

var (
	fw = &framework.Framework{Name: "realnode", FullCluster: true, Webhooks: true, RealNodes: nodes,
		Configure: func(c *configv1alpha1.Configuration) {
			// The image every node imported, under the name config/ uses.
			c.Agent.Image = images.Agent
			// The nodes' containerd mounts image volumes: the workers run
			// the supervisor from the agent's image. The Trainer and
			// install suites keep the default, the postStart hook's copy.
			c.Agent.SupervisorVolume = configv1alpha1.SupervisorVolumeImage
			c.Controller.InPlaceRestartTimeout = &metav1.Duration{Duration: inPlaceRestartTimeout}
		},
	}
	// inPlaceRestartTimeout is the manager's: longer than the Job
	// controller may take to replace a deleted Pod (measured up to 59 s
	// here, with its failure back-off), shorter than the specs wait. The
	// timeout spec restarts the manager with a shorter one.
	inPlaceRestartTimeout = 150 * time.Second
	cfg                   *rest.Config
	ctx                   context.Context
	k8sClient             client.Client
	clientset             *kubernetes.Clientset
)

func TestRealNodes(t *testing.T) {
	cluster.SkipWithoutRealNodes(t)
	RegisterFailHandler(Fail)
	RunSpecs(t, "In-place restart on real kubelets")
}

var _ = BeforeSuite(func() {
	cfg = fw.Init()
	ctx, k8sClient = fw.SetupClient(cfg)
	clientset = kubernetes.NewForConfigOrDie(cfg)
	fw.StartManager(cfg)
	// Agents run as their Pods, under the admission policy config/ ships.
	Expect(deploy.ApplyKustomization(ctx, k8sClient, deploy.AgentPolicy)).To(Succeed())
})

var _ = AfterSuite(func() {
	fw.Teardown()
	// The host as it was: no process, mount, cgroup, interface, iptables
	// chain or path of the nodes left (checked by Stop under the lock).
	if fw.Cluster != nil {
		left := fw.Cluster.LeftOnHost()
		Expect(left).To(BeEmpty(), "the host differs after the real nodes stopped:\n%s", strings.Join(left, "\n"))
	}
})
