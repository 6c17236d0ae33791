package images

import (
	"context"
	"io"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Kueue is the repository and tag, in the local cluster's registry, of
// Kueue's controller manager (sigs.k8s.io/kueue/cmd/kueue, built from its
// module by 'make cluster-binaries' as bin/kueue). The real nodes pull it
// as KueueImage, the name Kueue's release manifests give it.
// KueueVersion is the version hack/kueue pins (test/kueue refuses
// another).
const (
	KueueVersion = "v0.19.2"
	Kueue        = "kueue/kueue:" + KueueVersion
	KueueImage   = "registry.k8s.io/" + Kueue
)

// PushKueue packs Kueue's manager at binary as its Dockerfile does and
// pushes it to registry as Kueue.
func PushKueue(ctx context.Context, binary, registry string) (string, error) {
	return pushManager(ctx, binary, registry, Kueue)
}

// Trainer is the repository and tag, in the local cluster's registry, of
// Kubeflow Trainer's controller manager
// (github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager, built
// from its module by 'make cluster-binaries' as
// bin/trainer-controller-manager). The real nodes pull it as
// TrainerImage, the name Trainer's manifests give it.
// TrainerVersion is the version hack/kubeflow-trainer pins
// (test/kubeflowtrainer refuses another).
const (
	TrainerVersion = "v2.2.1"
	Trainer        = "kubeflow/trainer/trainer-controller-manager:" + TrainerVersion
	TrainerImage   = "ghcr.io/" + Trainer
)

// PushTrainer packs Trainer's manager at binary as its Dockerfile does
// and pushes it to registry as Trainer.
func PushTrainer(ctx context.Context, binary, registry string) (string, error) {
	return pushManager(ctx, binary, registry, Trainer)
}

// Agnhost is the repository and tag, in the local cluster's registry, of
// the Kubernetes end-to-end tests' image, agnhost
// (k8s.io/kubernetes/test/images/agnhost at the cluster's version, whose
// VERSION says 2.63.0, built by 'make cluster-binaries' as bin/agnhost).
// The real nodes pull it as AgnhostImage; Kueue's suite runs it as
// E2E_TEST_AGNHOST_IMAGE says.
const (
	Agnhost      = "e2e-test-images/agnhost:2.63.0"
	AgnhostImage = "registry.k8s.io/" + Agnhost
)

// PushAgnhost pushes agnhost, the binary at binary, to registry as
// Agnhost: /agnhost its entrypoint, as agnhost's Dockerfile has it, on
// the root file system of PushBash (its own base holds a shell too).
func PushAgnhost(ctx context.Context, root, cacheDir, binary, registry string, log io.Writer) (string, error) {
	base, err := debianLayer(ctx, root, cacheDir, log)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(binary)
	if err != nil {
		return "", err
	}
	layer, err := layerOf(nil, entry{path: "/agnhost", mode: 0o755, data: data})
	if err != nil {
		return "", err
	}
	img, err := configuredImage(func(c *v1.Config) {
		c.Entrypoint = []string{"/agnhost"}
		c.Env = []string{debianPath}
	}, base, layer)
	if err != nil {
		return "", err
	}
	return push(ctx, img, registry, Agnhost)
}

// pushManager packs a controller manager's binary as kubebuilder's
// Dockerfiles do (/manager, run as 65532 on a distroless base: here
// nothing but the binary and /tmp) and pushes it to registry as repo. It
// returns the image's reference in registry.
func pushManager(ctx context.Context, binary, registry, repo string) (string, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return "", err
	}
	layer, err := layerOf(nil, entry{path: "/tmp", mode: 0o1777, dir: true}, entry{path: "/manager", mode: 0o755, data: data})
	if err != nil {
		return "", err
	}
	img, err := configuredImage(func(c *v1.Config) {
		c.Entrypoint = []string{"/manager"}
		c.User = nonRootID + ":" + nonRootID
	}, layer)
	if err != nil {
		return "", err
	}
	return push(ctx, img, registry, repo)
}
