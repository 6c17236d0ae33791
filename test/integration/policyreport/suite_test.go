package policyreport

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inplace-dev/inplace/test/framework"
)

var (
	fw        = &framework.Framework{Name: "integration-policyreport"}
	cfg       *rest.Config
	ctx       context.Context
	k8sClient client.Client
)

func TestPolicyReport(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "Policy reports")
}

var _ = BeforeSuite(func() {
	cfg = fw.Init()
	ctx, k8sClient = fw.SetupClient(cfg)
})

var _ = AfterSuite(func() {
	fw.Teardown()
})
