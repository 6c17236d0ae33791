package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/inplace-dev/inplace/test/cluster"
)

// Every manifest a user finds first — this project's examples/ and
// upstream JobSet's own examples — is admitted as `kubectl apply
// --server-side` sends it: strict field validation, the webhooks and the
// policies in force. A dry run: nothing is created, so a cluster-scoped
// example (a JobSetPolicy) changes nothing for the other specs.
var _ = Describe("the examples", func() {
	It("are admitted by the CRDs and the webhooks, ours and upstream JobSet's", func() {
		root, err := cluster.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		ns := fw.NewNamespace(ctx, k8sClient)
		var files []string
		for _, dir := range []string{filepath.Join(root, "examples"), filepath.Join(root, "test", "testdata", "upstream-jobset", "examples")} {
			Expect(filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
					files = append(files, path)
				}
				return err
			})).To(Succeed())
		}
		Expect(len(files)).To(BeNumerically(">", 40), "the examples were not found")

		applied := 0
		for _, path := range files {
			for i, obj := range manifests(path) {
				if obj.GetNamespace() != "" || namespaced(obj) {
					obj.SetNamespace(ns.Name)
				}
				// An apply patch, not Client.Apply: strict field validation,
				// kubectl's default, is no option of Client.Apply.
				err := k8sClient.Patch(ctx, obj, client.Apply, client.FieldOwner("examples-test"), client.ForceOwnership, //nolint:staticcheck // see above
					client.DryRunAll, client.FieldValidation("Strict"))
				if name := rel(root, path); refusedOnPurpose[name] != "" {
					// A documented difference (docs/compatibility.md).
					Expect(err).To(MatchError(ContainSubstring(refusedOnPurpose[name])), name)
					continue
				}
				Expect(err).NotTo(HaveOccurred(), "%s, document %d (%s %s)", rel(root, path), i, obj.GetKind(), obj.GetName())
				applied++
			}
		}
		GinkgoWriter.Printf("%d objects from %d files admitted\n", applied, len(files))
	})
})

// refusedOnPurpose are the examples refused on purpose, by file, with the
// message that says why: upstream's kubebuilder sample has an empty spec
// ("TODO(user): Add fields here"), which upstream admits and we take for a
// manifest cut short (docs/compatibility.md).
var refusedOnPurpose = map[string]string{
	"test/testdata/upstream-jobset/examples/config-samples__batch_v1alpha2_jobset.yaml": "spec.replicatedJobs must list at least one replicated job",
}

// manifests are the Kubernetes objects of a YAML file, in order: documents
// without apiVersion and kind (a policy's parameters, say) are not objects.
func manifests(path string) []*unstructured.Unstructured {
	GinkgoHelper()
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	var out []*unstructured.Unstructured
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		Expect(err).NotTo(HaveOccurred(), path)
		obj := &unstructured.Unstructured{}
		Expect(yaml.Unmarshal(doc, &obj.Object)).To(Succeed(), path)
		if obj.GetAPIVersion() != "" && obj.GetKind() != "" {
			out = append(out, obj)
		}
	}
}

// namespaced reports whether the object's kind is namespaced on this
// cluster.
func namespaced(obj *unstructured.Unstructured) bool {
	GinkgoHelper()
	ok, err := k8sClient.IsObjectNamespaced(obj)
	Expect(err).NotTo(HaveOccurred(), "%s %s", obj.GetKind(), obj.GetName())
	return ok
}

func rel(root, path string) string {
	r, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return r
}
