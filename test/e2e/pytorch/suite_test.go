package pytorch

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/deploy"
	"github.com/inplace-dev/inplace/test/framework"
	"github.com/inplace-dev/inplace/test/images"
)

// nodes is how many real nodes the suite runs: one PyTorch Pod per node,
// two ranks per Pod.
const nodes = 2

var (
	fw = &framework.Framework{Name: "pytorch", FullCluster: true, Webhooks: true, RealNodes: nodes,
		Configure: func(c *configv1alpha1.Configuration) {
			c.Agent.Image = images.Agent
			c.Agent.SupervisorVolume = configv1alpha1.SupervisorVolumeImage
		},
	}
	ctx       context.Context
	k8sClient client.Client
	clientset *kubernetes.Clientset
)

func TestPyTorch(t *testing.T) {
	cluster.SkipWithoutRealNodes(t)
	RegisterFailHandler(Fail)
	RunSpecs(t, "PyTorch DDP restarted in place on real kubelets")
}

var _ = BeforeSuite(func() {
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	bin, err := cluster.BinDir()
	Expect(err).NotTo(HaveOccurred())
	// Debian's packages are cached in bin/images: only a cold machine
	// builds the root file system (about 1.5 minutes).
	buildCtx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	img, err := images.BuildPyTorch(buildCtx, root, filepath.Join(bin, "images"), filepath.Join(GinkgoT().TempDir(), "inplace-pytorch.tar"), GinkgoWriter)
	Expect(err).NotTo(HaveOccurred(), "building the PyTorch image")
	GinkgoWriter.Printf("built %s in %v (%d MB, cached root file system: %v)\n", images.PyTorch, time.Since(start).Round(time.Second), img.Size>>20, img.Cached)
	fw.ExtraImages = []string{img.Archive}

	cfg := fw.Init()
	ctx, k8sClient = fw.SetupClient(cfg)
	clientset = kubernetes.NewForConfigOrDie(cfg)
	fw.StartManager(cfg)
	Expect(deploy.ApplyKustomization(ctx, k8sClient, deploy.AgentPolicy)).To(Succeed())
})

var _ = AfterSuite(func() {
	fw.Teardown()
	if fw.Cluster != nil {
		left := fw.Cluster.LeftOnHost()
		Expect(left).To(BeEmpty(), "the host differs after the real nodes stopped:\n%s", strings.Join(left, "\n"))
	}
})
