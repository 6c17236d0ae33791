// Package api tests the JobSet CRD on a real kube-apiserver (envtest, with
// the binaries of hack/): schema, defaults, enums, CEL rules and round trips
// of the specifications' manifests.
package api

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inplace-dev/inplace/test/framework"
)

var (
	fw            = &framework.Framework{Name: "integration-api"}
	cfg           *rest.Config
	ctx           context.Context
	k8sClient     client.Client
	dynamicClient dynamic.Interface
)

func TestAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "JobSet API")
}

var _ = BeforeSuite(func() {
	cfg = fw.Init()
	ctx, k8sClient = fw.SetupClient(cfg)
	var err error
	dynamicClient, err = dynamic.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	fw.Teardown()
})
