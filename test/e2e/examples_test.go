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
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/kubeflowtrainer"
	"github.com/inplace-dev/inplace/webhook/inject"
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
		// examples/pytorch/trainer holds Kubeflow Trainer's kinds: its
		// CRDs, from the module hack/kubeflow-trainer pins, check them.
		trainer, err := kubeflowtrainer.Module.Dir(ctx, root)
		Expect(err).NotTo(HaveOccurred())
		crds, err := filepath.Glob(filepath.Join(trainer, "manifests", "base", "crds", "trainer.kubeflow.org_*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(crds).NotTo(BeEmpty(), "Trainer's CRDs in its module")
		_, err = envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: crds, ErrorIfPathMissing: true})
		Expect(err).NotTo(HaveOccurred(), "installing Trainer's CRDs")
		ns := fw.NewNamespace(ctx, k8sClient)
		var files []string
		for _, dir := range []string{filepath.Join(root, "examples"), filepath.Join(root, "test", "testdata", "upstream-jobset", "examples")} {
			before := len(files)
			Expect(filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
					files = append(files, path)
				}
				return err
			})).To(Succeed())
			Expect(len(files)).To(BeNumerically(">", before), "no examples found in %s", dir)
		}

		refused, injected := map[string]bool{}, 0
		for _, path := range files {
			name := rel(root, path)
			objs := manifests(path)
			if !dataFiles[name] {
				Expect(objs).NotTo(BeEmpty(), "%s holds no Kubernetes object", name)
			}
			for i, obj := range objs {
				if obj.GetNamespace() != "" || namespaced(obj) {
					obj.SetNamespace(ns.Name)
				}
				// An apply patch, not Client.Apply: strict field validation,
				// kubectl's default, is no option of Client.Apply.
				err := k8sClient.Patch(ctx, obj, client.Apply, client.FieldOwner("examples-test"), client.ForceOwnership, //nolint:staticcheck // see above
					client.DryRunAll, client.FieldValidation("Strict"))
				if why := refusedOnPurpose[name]; why != "" {
					// A documented difference (docs/reference/compatibility.md).
					Expect(err).To(MatchError(ContainSubstring(why)), name)
					refused[name] = true
					continue
				}
				Expect(err).NotTo(HaveOccurred(), "%s, document %d (%s %s)", name, i, obj.GetKind(), obj.GetName())
				// The dry run's answer is the object as it would be stored:
				// an InPlaceRestart JobSet went through the mutating webhook.
				if _, ok := obj.GetAnnotations()[inject.InjectedAnnotation]; ok {
					injected++
				}
			}
		}
		for name := range refusedOnPurpose {
			Expect(refused).To(HaveKey(name), "%s is no longer among the examples: drop it from refusedOnPurpose", name)
		}
		Expect(injected).To(BeNumerically(">", 0), "no InPlaceRestart example went through the mutating webhook")
	})
})

// dataFiles are YAML files among the examples that hold no Kubernetes
// object: a policy's parameters.
var dataFiles = map[string]bool{"examples/policies/params.yaml": true}

// refusedOnPurpose are the examples refused on purpose, by file, with the
// message that says why: upstream's kubebuilder sample has an empty spec
// (only the scaffold's comment asking for fields), which upstream admits and
// we take for a manifest cut short (docs/reference/compatibility.md).
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
		Expect(yaml.UnmarshalStrict(doc, &obj.Object)).To(Succeed(), path)
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
