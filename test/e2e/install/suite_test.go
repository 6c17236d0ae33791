package install

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/deploy"
	"github.com/inplace-dev/inplace/test/framework"
)

var (
	// One node runs the manager and the workers; no manager runs in the
	// test process, and the CRDs come with what the user installs. The
	// release's images reach the node through the registry.
	fw        = &framework.Framework{Name: "install", FullCluster: true, RealNodes: 1, NoCRDs: true, Registry: true}
	cfg       *rest.Config
	ctx       context.Context
	k8sClient client.Client
)

func TestInstall(t *testing.T) {
	cluster.SkipWithoutRealNodes(t)
	RegisterFailHandler(Fail)
	RunSpecs(t, "Installing inplace as docs/how-to/install.md says")
}

var _ = BeforeSuite(func() {
	ctrllog.SetLogger(GinkgoLogr)
	cfg = fw.Init()
	ctx, k8sClient = fw.SetupClient(cfg)
	// A cluster with cert-manager and the Prometheus Operator installed, as
	// far as the apiserver can tell: their CRDs validate our objects.
	Expect(deploy.InstallThirdPartyCRDs(ctx, cfg)).To(Succeed())
})

var _ = AfterSuite(func() {
	fw.Teardown()
	if fw.Cluster != nil {
		left := fw.Cluster.LeftOnHost()
		Expect(left).To(BeEmpty(), "the host differs after the real node stopped:\n%s", strings.Join(left, "\n"))
	}
})
