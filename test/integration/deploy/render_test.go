package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/inplace-dev/inplace/test/cluster"
)

// tool finds a binary the Makefile installs: $NAME (KUSTOMIZE, HELM) or
// bin/<name>-<version>.
func tool(env, name string) string {
	GinkgoHelper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	matches, _ := filepath.Glob(filepath.Join(root, "bin", name+"-*"))
	Expect(matches).NotTo(BeEmpty(), "%s is not installed: run 'make %s'", name, name)
	return matches[len(matches)-1]
}

func run(name string, args ...string) ([]byte, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %v: %w: %s", filepath.Base(name), args, err, stderr.String())
	}
	return out, nil
}

func decode(data []byte) []*unstructured.Unstructured {
	GinkgoHelper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs
		}
		Expect(err).NotTo(HaveOccurred())
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

func kustomize(dir string) []*unstructured.Unstructured {
	GinkgoHelper()
	out, err := run(tool("KUSTOMIZE", "kustomize"), "build", dir)
	Expect(err).NotTo(HaveOccurred())
	return decode(out)
}

const kubeVersion = "1.36.0"

func helmTemplate(args ...string) ([]*unstructured.Unstructured, error) {
	out, err := run(tool("HELM", "helm"), append([]string{"template", "inplace", "charts/inplace",
		"--namespace", "inplace-system", "--include-crds", "--kube-version", kubeVersion}, args...)...)
	if err != nil {
		return nil, err
	}
	return decode(out), nil
}

func key(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
}

// comparable drops what differs by nature between the two renderings: the
// chart's config checksum annotation, and the config file's layout (it is
// compared parsed).
func comparable(u *unstructured.Unstructured) map[string]any {
	GinkgoHelper()
	c := u.DeepCopy()
	if c.GetKind() == "Deployment" {
		unstructured.RemoveNestedField(c.Object, "spec", "template", "metadata", "annotations", "checksum/config")
		if a, _, _ := unstructured.NestedMap(c.Object, "spec", "template", "metadata", "annotations"); len(a) == 0 {
			unstructured.RemoveNestedField(c.Object, "spec", "template", "metadata", "annotations")
		}
	}
	if c.GetKind() == "ConfigMap" {
		data, _, _ := unstructured.NestedStringMap(c.Object, "data")
		parsed := map[string]any{}
		for k, v := range data {
			var m any
			Expect(yaml.Unmarshal([]byte(v), &m)).To(Succeed())
			parsed[k] = m
		}
		c.Object["data"] = parsed
	}
	return c.Object
}

func byKey(objs []*unstructured.Unstructured) map[string]map[string]any {
	GinkgoHelper()
	m := map[string]map[string]any{}
	for _, u := range objs {
		m[key(u)] = comparable(u)
	}
	return m
}

// dryRun applies every object with server-side dry-run, creating the
// namespaces they name for real first (a dry-run namespace does not exist
// for the next object).
func dryRun(objs []*unstructured.Unstructured) {
	GinkgoHelper()
	for _, u := range objs {
		if ns := u.GetNamespace(); ns != "" {
			err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			if !apierrors.IsAlreadyExists(err) {
				Expect(err).NotTo(HaveOccurred())
			}
		}
	}
	for _, u := range objs {
		Expect(k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()), client.FieldOwner("inplace-test"), client.ForceOwnership, client.DryRunAll)).
			To(Succeed(), "the apiserver rejects %s", key(u))
	}
}

var _ = Describe("the deployment configuration", func() {
	It("renders the same objects with kustomize and with Helm's defaults", func() {
		fromKustomize := byKey(kustomize("config/default"))
		delete(fromKustomize, "Namespace /inplace-system") // Helm: --create-namespace
		objs, err := helmTemplate()
		Expect(err).NotTo(HaveOccurred())
		fromHelm := byKey(objs)
		Expect(keys(fromHelm)).To(ConsistOf(keys(fromKustomize)))
		for k, want := range fromKustomize {
			Expect(cmp.Diff(want, fromHelm[k])).To(BeEmpty(), "%s differs between config/default (-) and charts/inplace (+)", k)
		}
	})

	It("renders the same objects without cert-manager, with kustomize and with Helm", func() {
		fromKustomize := byKey(kustomize("config/selfsigned"))
		delete(fromKustomize, "Namespace /inplace-system")
		objs, err := helmTemplate("--set", "certManager.enabled=false,serviceMonitor.enabled=false,webhook.replicas=1")
		Expect(err).NotTo(HaveOccurred())
		fromHelm := byKey(objs)
		Expect(keys(fromHelm)).To(ConsistOf(keys(fromKustomize)))
		for k, want := range fromKustomize {
			Expect(cmp.Diff(want, fromHelm[k])).To(BeEmpty(), "%s differs between config/selfsigned (-) and charts/inplace (+)", k)
		}
		Expect(keys(fromKustomize)).NotTo(ContainElement(And(HavePrefix("PodDisruptionBudget "), HaveSuffix("inplace-webhook"))), "one replica and a budget of one block every drain")
	})

	It("installs without the Prometheus Operator, and adds its ServiceMonitor and alerts as an optional component, as Helm does when asked", func() {
		Expect(keys(byKey(kustomize("config/default")))).NotTo(ContainElement(HavePrefix("ServiceMonitor ")))
		root, err := cluster.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		overlay := GinkgoT().TempDir()
		config, err := filepath.Rel(overlay, filepath.Join(root, "config"))
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(overlay, "kustomization.yaml"),
			fmt.Appendf(nil, "resources: [%s/default]\ncomponents: [%s/prometheus]\n", config, config), 0o600)).To(Succeed())
		withMonitor := kustomize(overlay)
		fromKustomize := byKey(withMonitor)
		delete(fromKustomize, "Namespace /inplace-system")
		Expect(keys(fromKustomize)).To(ContainElements(HavePrefix("ServiceMonitor "), HavePrefix("PrometheusRule ")))
		objs, err := helmTemplate("--set", "serviceMonitor.enabled=true,prometheusRule.enabled=true")
		Expect(err).NotTo(HaveOccurred())
		fromHelm := byKey(objs)
		Expect(keys(fromHelm)).To(ConsistOf(keys(fromKustomize)))
		for k, want := range fromKustomize {
			Expect(cmp.Diff(want, fromHelm[k])).To(BeEmpty(), "%s differs between config/default with config/prometheus (-) and charts/inplace (+)", k)
		}
		dryRun(withMonitor)
	})

	It("is accepted by the apiserver, from kustomize, with and without cert-manager", func() {
		dryRun(kustomize("config/default"))
		dryRun(kustomize("config/selfsigned"))
	})

	It("installs under upstream JobSet's names: one Deployment in jobset-system, one service account of inplace's name, nothing of inplace-system left", func() {
		objs := kustomize("config/jobset-names")
		dryRun(objs)
		var deployments []string
		for _, u := range objs {
			gvk := u.GroupVersionKind()
			mapping, err := k8sClient.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
			Expect(err).NotTo(HaveOccurred(), key(u))
			if mapping.Scope.Name() == meta.RESTScopeNameRoot {
				Expect(u.GetNamespace()).To(BeEmpty(), "%s is cluster-scoped", key(u))
			} else {
				Expect(u.GetNamespace()).To(Equal("jobset-system"), key(u))
			}
			raw, err := json.Marshal(u.Object)
			Expect(err).NotTo(HaveOccurred())
			Expect(string(raw)).NotTo(ContainSubstring("inplace-system"), key(u))
			switch gvk.Kind {
			case "Deployment":
				deployments = append(deployments, u.GetName())
				sa, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "serviceAccountName")
				Expect(sa).To(Equal("inplace-manager"), "not upstream's jobset-controller-manager, whose bindings a cluster that ran upstream may keep")
			case "ServiceAccount":
				Expect(u.GetName()).To(Equal("inplace-manager"))
			case "RoleBinding", "ClusterRoleBinding":
				subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
				Expect(subjects).To(HaveExactElements(And(HaveKeyWithValue("name", "inplace-manager"), HaveKeyWithValue("namespace", "jobset-system"))), key(u))
			}
		}
		Expect(deployments).To(ConsistOf("jobset-controller-manager"))
	})

	It("is accepted by the apiserver, from Helm, with and without cert-manager", func() {
		objs, err := helmTemplate()
		Expect(err).NotTo(HaveOccurred())
		dryRun(objs)
		objs, err = helmTemplate("--set", "certManager.enabled=false,serviceMonitor.enabled=false,webhook.replicas=1,manager.priorityClass.create=false")
		Expect(err).NotTo(HaveOccurred())
		for _, u := range objs {
			Expect(u.GetAPIVersion()).NotTo(HavePrefix("cert-manager.io/"), key(u))
			Expect(u.GetKind()).NotTo(Equal("ServiceMonitor"))
			Expect(u.GetKind()).NotTo(Equal("PriorityClass"))
		}
		dryRun(objs)
	})

	It("issues the serving certificate from a CA of its own, so that its renewals keep the caBundle", func() {
		objs := byKey(kustomize("config/default"))
		serving := objs["Certificate inplace-system/inplace-serving-cert"]
		Expect(serving).NotTo(BeNil())
		issuer, _, _ := unstructured.NestedString(serving, "spec", "issuerRef", "name")
		ca, found, _ := unstructured.NestedString(objs["Issuer inplace-system/"+issuer], "spec", "ca", "secretName")
		Expect(found).To(BeTrue(), "the serving certificate's issuer %s is not a CA issuer", issuer)
		caCert := objs["Certificate inplace-system/inplace-ca"]
		Expect(caCert).NotTo(BeNil())
		Expect(caCert).To(HaveKeyWithValue("spec", HaveKeyWithValue("isCA", true)))
		Expect(caCert).To(HaveKeyWithValue("spec", HaveKeyWithValue("secretName", ca)))
	})

	It("always installs the agents' admission policy, and refuses the value that used to turn it off", func() {
		objs, err := helmTemplate()
		Expect(err).NotTo(HaveOccurred())
		Expect(byKey(objs)).To(HaveKey("ValidatingAdmissionPolicy /inplace-agent-epoch-only"))
		_, err = helmTemplate("--set", "agent.admissionPolicy=false")
		Expect(err).To(MatchError(ContainSubstring("agent.admissionPolicy is gone")))
		_, err = helmTemplate("--set", "agent.admissionPolicy=true")
		Expect(err).NotTo(HaveOccurred(), "an explicit true is what the chart does anyway")
	})

	It("offers a NetworkPolicy for the admission server, the same with kustomize and Helm, and accepted by the apiserver", func() {
		fromKustomize := byKey(kustomize("config/networkpolicy"))
		objs, err := helmTemplate("--set", "networkPolicy.enabled=true,networkPolicy.apiserverCIDRs={10.0.0.0/24}")
		Expect(err).NotTo(HaveOccurred())
		fromHelm := byKey(objs)
		const key = "NetworkPolicy inplace-system/inplace-webhook"
		Expect(fromKustomize).To(HaveKey(key))
		Expect(cmp.Diff(fromKustomize[key], fromHelm[key])).To(BeEmpty())
		dryRun(kustomize("config/networkpolicy"))
		_, err = helmTemplate("--set", "networkPolicy.enabled=true")
		Expect(err).To(MatchError(ContainSubstring("networkPolicy.enabled needs networkPolicy.apiserverCIDRs")))
	})

	It("pulls both images from one registry, named once", func() {
		objs, err := helmTemplate("--set", "imageRegistry=registry.example.com:5000/ml")
		Expect(err).NotTo(HaveOccurred())
		var images []string
		for _, u := range objs {
			if u.GetKind() == "Deployment" {
				containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
				for _, c := range containers {
					images = append(images, c.(map[string]any)["image"].(string))
				}
			}
			if u.GetKind() == "ConfigMap" {
				data, _, _ := unstructured.NestedStringMap(u.Object, "data")
				for _, v := range data {
					if m := regexp.MustCompile(`(?m)^\s*image: (\S+)$`).FindStringSubmatch(v); m != nil {
						images = append(images, m[1])
					}
				}
			}
		}
		Expect(images).To(ContainElements(
			HavePrefix("registry.example.com:5000/ml/inplace-manager:"),
			HavePrefix("registry.example.com:5000/ml/inplace-agent:"),
		))
		for _, img := range images {
			Expect(img).NotTo(ContainSubstring("ghcr.io"), "an image still pulled from its default registry")
		}
		for _, ok := range []string{"localhost:5000", "Registry.Example.com/a/b_c", "[::1]:5000/ml"} {
			_, err = helmTemplate("--set", "imageRegistry="+ok)
			Expect(err).NotTo(HaveOccurred(), "imageRegistry=%s", ok)
		}
		for _, bad := range []string{"https://registry.example.com", "registry.example.com/", "reg.io/-x", "reg.io/a..b", "-bad.host", "reg.io/ML"} {
			_, err = helmTemplate("--set", "imageRegistry="+bad)
			Expect(err).To(MatchError(ContainSubstring("imageRegistry")), "imageRegistry=%s", bad)
		}
	})

	It("refuses self-signed certificates with more than one replica, naming the fix", func() {
		_, err := helmTemplate("--set", "certManager.enabled=false")
		Expect(err).To(MatchError(ContainSubstring("set webhook.replicas=1")))
	})
})

func keys(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
