package kubeflowtrainer

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/inplace-dev/inplace/test/images"
	"github.com/inplace-dev/inplace/test/modules"
)

// Where Trainer's manifests run its controller manager.
const (
	Namespace  = "kubeflow-system"
	Deployment = "kubeflow-trainer-controller-manager"
)

// Module is Kubeflow Trainer's module as hack/kubeflow-trainer pins it.
var Module = modules.Module{Wrapper: "kubeflow-trainer", Path: "github.com/kubeflow/trainer/v2", Version: images.TrainerVersion}

// Kustomization is the module's manifests/overlays/manager, word for word
// but for the one resource its comment says to leave out when JobSet is
// installed ("../../third-party/jobset"): here inplace is. Its resources
// are the module's, under "module/" (docs/how-to/kubeflow-trainer.md
// shows it with Trainer's repository at the same tag instead).
const Kustomization = `namespace: kubeflow-system
resources:
- module/manifests/overlays/manager/namespace.yaml
- module/manifests/base/crds
- module/manifests/base/manager
- module/manifests/base/rbac
- module/manifests/base/webhook
images:
- name: ghcr.io/kubeflow/trainer/trainer-controller-manager
  newTag: ` + images.TrainerVersion + `
secretGenerator:
- name: kubeflow-trainer-webhook-cert
  namespace: kubeflow-system
  options:
    disableNameSuffixHash: true
configMapGenerator:
- name: kubeflow-trainer-public
  literals:
  - kubeflow_trainer_version=` + images.TrainerVersion + `
  options:
    disableNameSuffixHash: true
`

// Manifests renders Trainer's install into dir/install.yaml and returns
// that file's path: what `kubectl apply --server-side -f` takes.
func Manifests(ctx context.Context, root, dir string) (string, error) {
	return Module.Kustomize(ctx, root, dir, Kustomization)
}

// PushImage pushes Trainer's controller manager, built by 'make
// cluster-binaries' into bin, to registry under the name its manifests
// pull (images.TrainerImage).
func PushImage(ctx context.Context, bin, registry string) (string, error) {
	ref, err := images.PushTrainer(ctx, filepath.Join(bin, "trainer-controller-manager"), registry)
	if err != nil {
		return "", fmt.Errorf("the manager of Kubeflow Trainer (built by 'make cluster-binaries'): %w", err)
	}
	return ref, nil
}
