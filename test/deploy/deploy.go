package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	managerapp "github.com/inplace-dev/inplace/cmd/manager/app"
	"github.com/inplace-dev/inplace/test/cluster"
)

const (
	// ManagerNamespace is where config/ installs inplace.
	ManagerNamespace = "inplace-system"
	// ManagerServiceAccount and WebhookServiceAccount are the identities of
	// config/rbac: the JobSet controller's and the admission server's.
	ManagerServiceAccount = "inplace-manager"
	WebhookServiceAccount = "inplace-webhook"
	fieldOwner            = "inplace-deploy"
)

// ServiceAccount is the identity the Deployment of a manager role runs as:
// the admission server's for the webhook role, the controller's otherwise.
func ServiceAccount(role string) string {
	if role == managerapp.RoleWebhook {
		return WebhookServiceAccount
	}
	return ManagerServiceAccount
}

// Objects reads the objects of YAML manifests, given relative to the
// repository root.
func Objects(files ...string) ([]*unstructured.Unstructured, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if len(u.Object) > 0 {
				objs = append(objs, u)
			}
		}
	}
	return objs, nil
}

// Apply server-side applies the objects of YAML manifests, given relative
// to the repository root, creating the namespaces they name.
func Apply(ctx context.Context, c client.Client, files ...string) error {
	objs, err := Objects(files...)
	if err != nil {
		return err
	}
	for _, u := range objs {
		if ns := u.GetNamespace(); ns != "" {
			err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating namespace %s: %w", ns, err)
			}
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// ManagerConfig installs RBAC and returns a client configuration that
// authenticates as serviceAccount (ManagerServiceAccount or
// WebhookServiceAccount), with exactly the permissions RBAC grants it.
func ManagerConfig(ctx context.Context, admin *rest.Config, serviceAccount string, validity time.Duration) (*rest.Config, error) {
	c, err := client.New(admin, client.Options{})
	if err != nil {
		return nil, err
	}
	if err := Apply(ctx, c, RBAC...); err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	tr, err := cs.CoreV1().ServiceAccounts(ManagerNamespace).CreateToken(ctx, serviceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(validity.Seconds()))},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("a token for %s/%s: %w", ManagerNamespace, serviceAccount, err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = tr.Status.Token
	cfg.UserAgent = serviceAccount
	return cfg, nil
}

// KustomizationFiles returns the files of a kustomization directory's
// resources, given and returned relative to the repository root, in its
// order: what `kubectl apply -k dir` applies when the kustomization only
// lists files, as config/agent does. A kustomization that does more is
// refused rather than applied in part.
func KustomizationFiles(dir string) ([]string, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(root, dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k map[string]any
	if err := yaml.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("%s/kustomization.yaml: %w", dir, err)
	}
	var files []string
	for key, v := range k {
		switch key {
		case "apiVersion", "kind":
		case "resources":
			list, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("%s/kustomization.yaml: resources is not a list", dir)
			}
			for _, r := range list {
				name, ok := r.(string)
				if !ok || filepath.Ext(name) != ".yaml" {
					return nil, fmt.Errorf("%s/kustomization.yaml: resource %v is not a YAML file", dir, r)
				}
				files = append(files, filepath.Join(dir, name))
			}
		default:
			return nil, fmt.Errorf("%s/kustomization.yaml: %s is not supported here, only a list of resources", dir, key)
		}
	}
	return files, nil
}

// ApplyKustomization server-side applies the files a kustomization
// directory lists (KustomizationFiles).
func ApplyKustomization(ctx context.Context, c client.Client, dir string) error {
	files, err := KustomizationFiles(dir)
	if err != nil {
		return err
	}
	return Apply(ctx, c, files...)
}
