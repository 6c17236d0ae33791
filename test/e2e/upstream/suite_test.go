package upstream

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
	"github.com/inplace-dev/inplace/test/framework"
)

var (
	// Three real nodes, as the kind cluster upstream's suite is written
	// for; no manager in the test process: the drop-in install runs it in
	// the cluster, with the CRDs it installs.
	fw        = &framework.Framework{Name: "upstream", FullCluster: true, RealNodes: 3, NoCRDs: true, Registry: true}
	cfg       *rest.Config
	ctx       context.Context
	k8sClient client.Client
)

func TestUpstreamJobSetSuite(t *testing.T) {
	cluster.SkipWithoutRealNodes(t)
	RegisterFailHandler(Fail)
	RunSpecs(t, "Upstream JobSet's end-to-end suite against inplace's drop-in install")
}

var _ = BeforeSuite(func() {
	ctrllog.SetLogger(GinkgoLogr)
	cfg = fw.Init()
	ctx, k8sClient = fw.SetupClient(cfg)
	pushImages()
})

var _ = AfterSuite(func() {
	fw.Teardown()
	if fw.Cluster != nil {
		left := fw.Cluster.LeftOnHost()
		Expect(left).To(BeEmpty(), "the host differs after the real nodes stopped:\n%s", strings.Join(left, "\n"))
	}
})
