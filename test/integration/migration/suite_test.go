package migration

import (
	"context"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/framework"
)

var (
	// Upstream's CRD instead of ours: the cluster as upstream JobSet left it.
	fw        = &framework.Framework{Name: "integration-migration", NoCRDs: true}
	cfg       *rest.Config
	ctx       context.Context
	k8sClient client.Client
	root      string
)

func TestMigration(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "Migration from upstream JobSet")
}

var _ = BeforeSuite(func() {
	cfg = fw.Init()
	ctx, k8sClient = fw.SetupClient(cfg)
	var err error
	root, err = cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	_, err = envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		Paths:              []string{filepath.Join(root, "test", "testdata", "upstream-jobset", "crd")},
		ErrorIfPathMissing: true,
	})
	Expect(err).NotTo(HaveOccurred(), "installing upstream's CRD")
})

var _ = AfterSuite(func() {
	fw.Teardown()
})
