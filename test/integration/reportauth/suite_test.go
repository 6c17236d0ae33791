package reportauth

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inplace-dev/inplace/test/framework"
)

var (
	// No CRD, no manager: the suite needs the API server's token issuer
	// and RBAC, nothing of inplace's own.
	fw        = &framework.Framework{Name: "integration-reportauth", NoCRDs: true}
	cfg       *rest.Config
	ctx       context.Context
	k8sClient client.Client
	clientset kubernetes.Interface
)

func TestReportAuthentication(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "Agent report authentication")
}

var _ = BeforeSuite(func() {
	cfg = fw.Init()
	ctx, k8sClient = fw.SetupClient(cfg)
	var err error
	clientset, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	// The API server binds the discovery reads to every service account
	// by default; an administrator may remove that binding, and then the
	// manager has only what its ClusterRole grants. Removed here, so that
	// the specs show that grant to be necessary and enough.
	Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "system:service-account-issuer-discovery"},
	}))).To(Succeed())
})

var _ = AfterSuite(func() {
	fw.Teardown()
})
