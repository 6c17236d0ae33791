package docs

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/framework"
)

var (
	fw = &framework.Framework{
		Name:     "integration-docs",
		Webhooks: true,
		// Every CRD config/default installs, the PolicyReports' included.
		PolicyReports: true,
		Configure: func(c *configv1alpha1.Configuration) {
			// The guides read the audit's findings: an audit every
			// second has them a second after a change, not a minute.
			c.Policies.AuditInterval = &metav1.Duration{Duration: time.Second}
		},
	}
	cfg       *rest.Config
	ctx       context.Context
	k8sClient client.Client
	root      string
	// binDir holds inplacectl, built from the tree, and bin/kubectl: the
	// commands of the guides find them first on the PATH.
	binDir string
)

func TestDocs(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "The how-to guides' commands")
}

var _ = BeforeSuite(func() {
	var err error
	root, err = cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	binDir = GinkgoT().TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(binDir, "inplacectl"), "./cmd/inplacectl")
	build.Dir = root
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "building inplacectl:\n%s", out)
	bin, err := cluster.BinDir()
	Expect(err).NotTo(HaveOccurred())
	kubectl, err := filepath.Abs(filepath.Join(bin, "kubectl"))
	Expect(err).NotTo(HaveOccurred())
	Expect(os.Symlink(kubectl, filepath.Join(binDir, "kubectl"))).To(Succeed())

	cfg = fw.Init()
	ctx, k8sClient = fw.SetupClient(cfg)
	fw.StartManager(cfg)
})

var _ = AfterSuite(func() {
	fw.Teardown()
})
