package api

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
)

var _ = Describe("the manifests in examples/", func() {
	It("are all accepted by the apiserver", func() {
		var files []string
		Expect(filepath.WalkDir(filepath.Join("..", "..", "..", "examples"), func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".yaml") {
				files = append(files, path)
			}
			return err
		})).To(Succeed())
		Expect(files).NotTo(BeEmpty())

		ns := fw.NewNamespace(ctx, k8sClient)
		for _, file := range files {
			data, err := os.ReadFile(file)
			Expect(err).NotTo(HaveOccurred())
			var obj map[string]any
			Expect(yaml.UnmarshalStrict(data, &obj)).To(Succeed(), file)
			u := &unstructured.Unstructured{Object: obj}
			switch u.GetKind() {
			case "JobSet":
				_, err = dynamicClient.Resource(jobsetsGVR).Namespace(ns.Name).Create(ctx, u, metav1.CreateOptions{})
			case "JobSetPolicy":
				_, err = dynamicClient.Resource(policyv1alpha1.GroupVersion.WithResource("jobsetpolicies")).Create(ctx, u, metav1.CreateOptions{})
			default:
				// Data files of the examples (policy parameters), not objects.
				continue
			}
			Expect(err).NotTo(HaveOccurred(), file)
		}
	})
})
