package deploy

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/inplace-dev/inplace/test/cluster"
)

// objectKey names an object as the apiserver does.
type objectKey struct {
	group, kind, namespace, name string
}

func (k objectKey) String() string {
	s := k.kind
	if k.group != "" {
		s += "." + k.group
	}
	if k.namespace != "" {
		return s + " " + k.namespace + "/" + k.name
	}
	return s + " " + k.name
}

func keyOf(u *unstructured.Unstructured) objectKey {
	return objectKey{u.GroupVersionKind().Group, u.GetKind(), u.GetNamespace(), u.GetName()}
}

// inProcess is why the local install has no Pods of its own.
const inProcess = "the manager runs in the process that installs it (RunManager), not in Pods"

// onlyInDefault are the objects of config/default the local install
// leaves out on purpose, and why. Anything else config/default installs,
// the local cluster installs too.
var onlyInDefault = map[objectKey]string{
	// The Deployments, and what exists for their Pods only.
	{"apps", "Deployment", ManagerNamespace, "inplace-manager"}:                inProcess,
	{"apps", "Deployment", ManagerNamespace, "inplace-webhook"}:                inProcess,
	{"policy", "PodDisruptionBudget", ManagerNamespace, "inplace-manager"}:     inProcess,
	{"policy", "PodDisruptionBudget", ManagerNamespace, "inplace-webhook"}:     inProcess,
	{"scheduling.k8s.io", "PriorityClass", "", "inplace-manager"}:              inProcess,
	{"", "ConfigMap", ManagerNamespace, "inplace-manager-config"}:              "the in-process managers take their configuration as a value (configv1alpha1.Load, then the caller's changes)",
	{"", "Service", ManagerNamespace, "inplace-manager-metrics"}:               "the in-process managers serve no metrics",
	{"rbac.authorization.k8s.io", "ClusterRole", "", "inplace-metrics-reader"}: "the in-process managers serve no metrics, so no one reads them",
	// The webhooks are called by URL on a local port (RegisterWebhooks),
	// not through a Service, with a certificate the admission server
	// signs itself (webhook.selfSignedCerts), as config/selfsigned does,
	// not one of cert-manager's, which the local cluster does not run.
	{"", "Service", ManagerNamespace, "inplace-webhook-service"}:                 "the webhooks are called by URL",
	{"cert-manager.io", "Issuer", ManagerNamespace, "inplace-selfsigned-issuer"}: "no cert-manager: self-signed certificates",
	{"cert-manager.io", "Issuer", ManagerNamespace, "inplace-ca-issuer"}:         "no cert-manager: self-signed certificates",
	{"cert-manager.io", "Certificate", ManagerNamespace, "inplace-ca"}:           "no cert-manager: self-signed certificates",
	{"cert-manager.io", "Certificate", ManagerNamespace, "inplace-serving-cert"}: "no cert-manager: self-signed certificates",
	// The restart benchmark applies the manager's API Priority and
	// Fairness itself, as it measures with and without it
	// (restartbench's NoManagerFlowSchema); the local cluster's few nodes
	// send no herd of agents' writes for it to protect from.
	{"flowcontrol.apiserver.k8s.io", "FlowSchema", "", "inplace-manager"}:                 "applied by the restart benchmark, which measures with and without it",
	{"flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration", "", "inplace-manager"}: "applied by the restart benchmark, which measures with and without it",
}

// onlyLocal are the objects the local install applies and config/default
// does not, and why.
var onlyLocal = map[objectKey]string{
	// config/selfsigned's: the admission server writes the CA of the
	// certificate it signs into the webhook configurations.
	{"rbac.authorization.k8s.io", "ClusterRole", "", "inplace-webhook-cabundle"}:        "the admission server signs its own certificate",
	{"rbac.authorization.k8s.io", "ClusterRoleBinding", "", "inplace-webhook-cabundle"}: "the admission server signs its own certificate",
}

// TestLocalInstallIsConfigDefault keeps the local install (LocalFiles) and
// config/default, rendered as kustomize does, in step: each object of one
// is in the other, or in onlyInDefault or onlyLocal, which name no object
// that is not a difference.
func TestLocalInstallIsConfigDefault(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	fromDefault := renderKustomization(t, root, "config/default")
	local := localObjects(t)

	const fix = "add its file to the local install, test/deploy/local.go (CRDs, RBAC or admissionPolicies, which InstallCRDs and RunManager apply), " +
		"or, if the local cluster must do without it, to onlyInDefault in test/deploy/local_test.go with the reason"
	for _, k := range sortedKeys(fromDefault) {
		why, listed := onlyInDefault[k]
		switch from, applied := local[k]; {
		case applied && listed:
			t.Errorf("onlyInDefault lists %s (%s), which the local install applies (%s): take it off the list", k, why, from)
		case !applied && !listed:
			t.Errorf("config/default installs %s (%s), which the local install does not: %s", k, fromDefault[k], fix)
		}
	}
	for _, k := range sortedKeys(local) {
		why, listed := onlyLocal[k]
		switch _, installed := fromDefault[k]; {
		case installed && listed:
			t.Errorf("onlyLocal lists %s (%s), which config/default installs too: take it off the list", k, why)
		case !installed && !listed:
			t.Errorf("the local install applies %s (%s), which config/default does not install: add it to config/default, "+
				"or, if only the local cluster needs it, to onlyLocal in test/deploy/local_test.go with the reason", k, local[k])
		}
	}
	for _, k := range sortedKeys(onlyInDefault) {
		if _, ok := fromDefault[k]; !ok {
			t.Errorf("onlyInDefault lists %s, which config/default does not install: take it off the list", k)
		}
	}
	for _, k := range sortedKeys(onlyLocal) {
		if _, ok := local[k]; !ok {
			t.Errorf("onlyLocal lists %s, which the local install does not apply: take it off the list", k)
		}
	}
}

// renderKustomization builds a kustomization of the repository as
// kustomize does and returns its objects, each with the file of config/
// it comes from.
func renderKustomization(t *testing.T, root, dir string) map[objectKey]string {
	t.Helper()
	// A kustomization of our own around it records each object's origin.
	wrapper := t.TempDir()
	target, err := filepath.Rel(wrapper, filepath.Join(root, dir))
	if err != nil {
		t.Fatal(err)
	}
	k := fmt.Sprintf("resources:\n- %s\nbuildMetadata: [originAnnotations]\n", filepath.ToSlash(target))
	if err := os.WriteFile(filepath.Join(wrapper, "kustomization.yaml"), []byte(k), 0o600); err != nil {
		t.Fatal(err)
	}
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), wrapper)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out := map[objectKey]string{}
	for _, res := range resources.Resources() {
		m, err := res.Map()
		if err != nil {
			t.Fatal(err)
		}
		from := dir
		if origin, err := res.GetOrigin(); err == nil && origin != nil && origin.Path != "" {
			if rel, err := filepath.Rel(root, filepath.Join(wrapper, origin.Path)); err == nil {
				from = rel
			}
		}
		out[keyOf(&unstructured.Unstructured{Object: m})] = from
	}
	if len(out) == 0 {
		t.Fatalf("kustomize build %s: no objects", dir)
	}
	return out
}

// localObjects returns the objects the local install applies, each with
// its file, and the namespaces Apply creates for them.
func localObjects(t *testing.T) map[objectKey]string {
	t.Helper()
	files, err := LocalFiles()
	if err != nil {
		t.Fatal(err)
	}
	out := map[objectKey]string{}
	for _, f := range files {
		objs, err := Objects(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(objs) == 0 {
			t.Errorf("%s holds no object", f)
		}
		for _, u := range objs {
			out[keyOf(u)] = f
			if ns := u.GetNamespace(); ns != "" {
				k := objectKey{kind: "Namespace", name: ns}
				if _, ok := out[k]; !ok {
					out[k] = "created by Apply for " + f
				}
			}
		}
	}
	return out
}

func sortedKeys[V any](m map[objectKey]V) []objectKey {
	return slices.SortedFunc(maps.Keys(m), func(a, b objectKey) int { return strings.Compare(a.String(), b.String()) })
}
