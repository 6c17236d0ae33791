// Package deploy tests what a platform team installs: the kustomize
// configuration of config/ and the Helm chart of charts/ render the same
// objects, and every one is accepted by a real kube-apiserver (server-side
// dry-run, with the CRDs of cert-manager and the Prometheus Operator
// installed); the Dockerfile's builds work from what it copies; the
// manager's RBAC stays least privilege.
package deploy

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inplace-dev/inplace/test/deploy"
	"github.com/inplace-dev/inplace/test/framework"
)

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
	Expect(deploy.InstallThirdPartyCRDs(ctx, cfg)).To(Succeed())
})

var _ = AfterSuite(func() {
	fw.Teardown()
})
