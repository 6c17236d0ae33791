package util

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	jobsetv1alpha2 "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/cluster"
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

// LoadSpec reads a manifest of test/testdata/specs (the specifications'
// user stories) into the namespace.
func LoadSpec(file, namespace string) *jobsetv1alpha2.JobSet {
	ginkgo.GinkgoHelper()
	root, err := cluster.RepoRoot()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	data, err := os.ReadFile(filepath.Join(root, "test", "testdata", "specs", file))
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	var js jobsetv1alpha2.JobSet
	gomega.Expect(yaml.UnmarshalStrict(data, &js)).To(gomega.Succeed())
	js.Namespace = namespace
	return &js
}
