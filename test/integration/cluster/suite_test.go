// Package cluster tests the local cluster itself: the real Job controller
// creates Pods and the real scheduler binds them to Nodes the test
// registered, with the restart-rule feature gates on.
package cluster

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inplace-dev/inplace/test/framework"
)

var (
	fw        = &framework.Framework{Name: "integration-cluster", FullCluster: true}
	ctx       context.Context
	k8sClient client.Client
)

func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local cluster")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "Local cluster")
}

var _ = BeforeSuite(func() {
	ctx, k8sClient = fw.SetupClient(fw.Init())
})

var _ = AfterSuite(func() {
	fw.Teardown()
})
