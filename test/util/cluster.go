package util

import (
	"context"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CreateNode registers a Node with its status, which create alone drops.
func CreateNode(ctx context.Context, c client.Client, node *corev1.Node) {
	ginkgo.GinkgoHelper()
	status := node.Status
	gomega.Expect(c.Create(ctx, node)).To(gomega.Succeed())
	node.Status = status
	gomega.Expect(c.Status().Update(ctx, node)).To(gomega.Succeed())
}

// WaitForDefaultServiceAccount waits until the service account controller
// has created the namespace's default ServiceAccount, without which the
// ServiceAccount admission plugin rejects Pods.
func WaitForDefaultServiceAccount(ctx context.Context, c client.Client, namespace string) {
	ginkgo.GinkgoHelper()
	gomega.Eventually(func() error {
		return c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "default"}, &corev1.ServiceAccount{})
	}).WithTimeout(30 * time.Second).Should(gomega.Succeed())
}
