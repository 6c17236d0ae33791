package controller

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	managerapp "github.com/inplace-dev/inplace/cmd/manager/app"
	"github.com/inplace-dev/inplace/controller"
	"github.com/inplace-dev/inplace/controller/coexist"
	"github.com/inplace-dev/inplace/test/deploy"
)

// countingTransport counts the requests that leave through it.
type countingTransport struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.next.RoundTrip(r)
}

var _ = Describe("the upstream gate's watch", func() {
	It("follows the CRD and upstream's Leases with the controller's rights, and reads nothing to serve a check", func() {
		// A namespace of the spec's own for upstream, so that the Lease
		// it takes does not hold back the suite's manager.
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "upstream-watch-"}}
		Expect(k8sClient.Create(ctx, ns)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, ns))).To(Succeed()) })

		By("watching as the controller's service account, through a transport that counts requests")
		asController, err := deploy.ManagerConfig(ctx, cfg, deploy.ServiceAccount(managerapp.RoleController), time.Hour)
		Expect(err).NotTo(HaveOccurred())
		var requests atomic.Int64
		asController.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt, &requests} })
		// The manager's scheme has no CRD type: the CRD's metadata is read
		// as PartialObjectMetadata.
		scheme := runtime.NewScheme()
		Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
		c, err := client.NewWithWatch(asController, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		w := controller.NewUpstreamWatch(c, ns.Name)
		watchCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			Expect(w.Start(watchCtx)).To(Succeed())
		}()
		DeferCleanup(func() {
			stop()
			Eventually(done).WithTimeout(timeout).Should(BeClosed())
		})
		get := func(key types.NamespacedName, obj client.Object) error {
			readCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			return w.Get(readCtx, key, obj)
		}

		By("the CRD's metadata, as the API server has it")
		var crd apiextensionsv1.CustomResourceDefinition
		Expect(k8sClient.Get(ctx, types.NamespacedName{Name: coexist.CRDName}, &crd)).To(Succeed())
		meta := &metav1.PartialObjectMetadata{}
		Expect(get(types.NamespacedName{Name: coexist.CRDName}, meta)).To(Succeed())
		Expect(meta.UID).To(Equal(crd.UID))
		// Its kind too: the gate records Events on it.
		Expect(meta.GroupVersionKind()).To(Equal(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")))
		leaseKey := types.NamespacedName{Namespace: ns.Name, Name: coexist.UpstreamLeaseNames[0]}
		Expect(apierrors.IsNotFound(get(leaseKey, &coordinationv1.Lease{}))).To(BeTrue(), "no upstream Lease yet: NotFound")

		By("reads served without a request")
		before := requests.Load()
		for range 20 {
			Expect(get(types.NamespacedName{Name: coexist.CRDName}, meta)).To(Succeed())
			Expect(apierrors.IsNotFound(get(leaseKey, &coordinationv1.Lease{}))).To(BeTrue())
		}
		// The watches' own requests (a watch closed by the API server is
		// opened again) may land meanwhile; reads would be 40.
		Expect(requests.Load() - before).To(BeNumerically("<", 5))

		By("upstream's Lease taken: told on Changed and read at once")
		for len(w.Changed()) > 0 {
			<-w.Changed()
		}
		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: leaseKey.Namespace, Name: leaseKey.Name},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To("jobset-controller-manager-0_1"),
				LeaseDurationSeconds: ptr.To[int32](15),
				RenewTime:            &metav1.MicroTime{Time: time.Now()},
			},
		}
		Expect(k8sClient.Create(ctx, lease)).To(Succeed())
		Eventually(w.Changed()).WithTimeout(timeout).Should(Receive())
		// The signal may be another object's (the CRD's status): wait for
		// the Lease itself.
		Eventually(func(g Gomega) {
			var seen coordinationv1.Lease
			g.Expect(get(leaseKey, &seen)).To(Succeed())
			g.Expect(seen.Spec.HolderIdentity).To(Equal(lease.Spec.HolderIdentity))
		}).WithTimeout(timeout).Should(Succeed())

		By("upstream's Lease deleted")
		Expect(k8sClient.Delete(ctx, lease)).To(Succeed())
		Eventually(func() bool { return apierrors.IsNotFound(get(leaseKey, &coordinationv1.Lease{})) }).WithTimeout(timeout).Should(BeTrue())
	})
})
