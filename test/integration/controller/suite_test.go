// Package controller tests the JobSet controller end to end on the local
// cluster: the real Job controller creates and fails Jobs, the real
// scheduler binds Pods to Nodes the suite registers, and the suite plays the
// kubelet by writing Pod statuses.
package controller

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inplace-dev/inplace/test/framework"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/test/wrappers"
)

var (
	fw        = &framework.Framework{Name: "integration-controller", FullCluster: true, Webhooks: true}
	cfg       *rest.Config
	ctx       context.Context
	k8sClient client.Client
)

func TestController(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local cluster")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "JobSet controller")
}

var _ = BeforeSuite(func() {
	cfg = fw.Init()
	ctx, k8sClient = fw.SetupClient(cfg)
	for i := range 4 {
		util.CreateNode(ctx, k8sClient, wrappers.MakeNode(fmt.Sprintf("node-%d", i)).Obj())
	}
	util.RunPodTerminator(ctx, kubernetes.NewForConfigOrDie(cfg))
	fw.StartManager(cfg)
})

var _ = AfterSuite(func() {
	fw.Teardown()
})
