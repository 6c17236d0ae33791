// Package deploy tests what a platform team installs: the kustomize
// configuration of config/ and the Helm chart of charts/ render the same
// objects, and every one is accepted by a real kube-apiserver (server-side
// dry-run, with the CRDs of cert-manager and the Prometheus Operator
// installed); the Dockerfile's builds work from what it copies; the
// manager's RBAC stays least privilege.
package deploy

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/inplace-dev/inplace/test/framework"
)

// The CRDs the configuration refers to, from the projects' own modules.
var thirdPartyCRDs = []struct{ module, files string }{
	{"github.com/cert-manager/cert-manager@v1.19.1", "deploy/crds/cert-manager.io_*.yaml"},
	{"github.com/prometheus-operator/prometheus-operator@v0.85.0", "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"},
}

var (
	fw        = &framework.Framework{Name: "integration-deploy"}
	cfg       *rest.Config
	ctx       context.Context
	k8sClient client.Client
)

func TestDeploy(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "Deployment manifests")
}

var _ = BeforeSuite(func() {
	cfg = fw.Init()
	ctx, k8sClient = fw.SetupClient(cfg)
	var paths []string
	for _, m := range thirdPartyCRDs {
		out, err := exec.Command("go", "mod", "download", "-json", m.module).Output()
		Expect(err).NotTo(HaveOccurred(), "downloading %s", m.module)
		var info struct{ Dir string }
		Expect(json.Unmarshal(out, &info)).To(Succeed())
		files, err := filepath.Glob(filepath.Join(info.Dir, m.files))
		Expect(err).NotTo(HaveOccurred())
		Expect(files).NotTo(BeEmpty(), "%s in %s", m.files, m.module)
		paths = append(paths, files...)
	}
	_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true})
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	fw.Teardown()
})
