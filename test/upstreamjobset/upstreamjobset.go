package upstreamjobset

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/images"
	"github.com/inplace-dev/inplace/test/modules"
)

// Where upstream's release manifests run its controller.
const (
	Namespace  = "jobset-system"
	Deployment = "jobset-controller-manager"
	// ServiceAccount is the controller's service account.
	ServiceAccount = "jobset-controller-manager"
	// AgentServiceAccount is the service account upstream's in-place
	// restart examples run as (GrantAgent).
	AgentServiceAccount = "jobset-in-place-restart"
)

// Upstream's in-place restart examples, as it publishes them (site/ of its
// repository, which its Go module does not hold: test/testdata keeps
// them). The agent's image is the one thing they leave to the user.
const (
	SidecarExample       = "in-place-restart__jobset-sidecar-container-mode.yaml"
	MainContainerExample = "in-place-restart__jobset-main-container-mode.yaml"
	// AgentContainer is the agent's container in both examples.
	AgentContainer = "in-place-restart-agent"
)

// kustomization is upstream's install, as its release manifests are made
// (the module's config/default, the controller's image the one its
// release promotes), with its InPlaceRestart feature gate on, as its docs
// for in-place restarts say: alpha, off by default.
const kustomization = `resources:
- module/config/default
images:
- name: us-central1-docker.pkg.dev/k8s-staging-images/jobset/jobset
  newName: registry.k8s.io/jobset/jobset
  newTag: v0.12.0
patches:
- target:
    kind: ConfigMap
    name: jobset-manager-config
  patch: |
    - op: replace
      path: /data/controller_manager_config.yaml
      value: |
        apiVersion: config.jobset.x-k8s.io/v1alpha1
        kind: Configuration
        leaderElection:
          leaderElect: true
        internalCertManagement:
          enable: true
        featureGates:
          InPlaceRestart: true
`

// Module is upstream JobSet's module as hack/upstream-jobset pins it.
var Module = modules.Module{Wrapper: "upstream-jobset", Path: "sigs.k8s.io/jobset", Version: "v0.12.0"}

// Manifests renders upstream's install into dir/install.yaml and returns
// that file's path: what `kubectl apply --server-side -f` takes.
func Manifests(ctx context.Context, root, dir string) (string, error) {
	return Module.Kustomize(ctx, root, dir, kustomization)
}

// PushImages pushes upstream's agent and controller, built by 'make
// cluster-binaries' into bin, to registry under the names its manifests
// and examples pull (images.UpstreamAgentImage, UpstreamControllerImage).
func PushImages(ctx context.Context, root, bin, registry string, log io.Writer) (agent, controller string, err error) {
	cache := filepath.Join(bin, "images")
	if agent, err = images.PushUpstreamAgent(ctx, root, cache, filepath.Join(bin, "jobset-in-place-restart-agent"), registry, log); err != nil {
		return "", "", fmt.Errorf("upstream's agent (built by 'make cluster-binaries'): %w", err)
	}
	if controller, err = images.PushUpstreamController(ctx, filepath.Join(bin, "jobset-controller"), registry); err != nil {
		return "", "", fmt.Errorf("upstream's controller (built by 'make cluster-binaries'): %w", err)
	}
	return agent, controller, nil
}

// GrantAgent gives ns the service account upstream's examples run as,
// with what upstream's agent calls (its examples' service-account
// example): it reads its JobSet and patches its Pod's attempt annotation.
// The namespace's default service account must exist first: Pods that
// run as any are refused until then.
func GrantAgent(ctx context.Context, c client.Client, ns string) error {
	meta := metav1.ObjectMeta{Name: AgentServiceAccount, Namespace: ns}
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: meta},
		&rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{jobset.GroupVersion.Group}, Resources: []string{"jobsets"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"patch"}},
		}},
		&rbacv1.RoleBinding{ObjectMeta: meta,
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: AgentServiceAccount},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: AgentServiceAccount, Namespace: ns}},
		},
	} {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("granting upstream's agent in %s: %w", ns, err)
		}
	}
	return nil
}

// Example is one of upstream's examples in ns, unchanged but for the
// agent's image, set to upstream's agent built from its module.
func Example(root, file, ns string) (*jobset.JobSet, error) {
	data, err := os.ReadFile(filepath.Join(root, "test", "testdata", "upstream-jobset", "examples", file))
	if err != nil {
		return nil, err
	}
	if n := strings.Count(string(data), "<CHANGE ME>"); n != 1 {
		return nil, fmt.Errorf("%s leaves %d images to the user, want the agent's alone", file, n)
	}
	var js jobset.JobSet
	if err := yaml.UnmarshalStrict([]byte(strings.Replace(string(data), "<CHANGE ME>", images.UpstreamAgentImage, 1)), &js); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	js.Namespace = ns
	return &js, nil
}
