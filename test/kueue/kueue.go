package kueue

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/inplace-dev/inplace/test/images"
	"github.com/inplace-dev/inplace/test/modules"
)

// Where Kueue's manifests run its controller manager.
const (
	Namespace  = "kueue-system"
	Deployment = "kueue-controller-manager"
	// ConfigMap holds its Configuration.
	ConfigMap = "kueue-manager-config"
)

// Module is Kueue's module as hack/kueue pins it.
var Module = modules.Module{Wrapper: "kueue", Path: "sigs.k8s.io/kueue", Version: images.KueueVersion}

// kustomization is Kueue's install as its release manifests are made (the
// module's config/default, the image its release promotes), with the
// Configuration the caller gives: config/default's own when empty.
const kustomization = `resources:
- module/config/default
images:
- name: us-central1-docker.pkg.dev/k8s-staging-images/kueue/kueue
  newName: registry.k8s.io/kueue/kueue
  newTag: ` + images.KueueVersion + `
`

// configPatch replaces the Configuration of config/default.
const configPatch = `patches:
- target:
    kind: ConfigMap
    name: manager-config
  patch: |
    - op: replace
      path: /data/controller_manager_config.yaml
      value: |
%s`

// Manifests renders Kueue's install into dir/install.yaml and returns that
// file's path: what `kubectl apply --server-side -f` takes. config, when
// not empty, is the Configuration it runs with instead of config/default's.
func Manifests(ctx context.Context, root, dir, config string) (string, error) {
	k := kustomization
	if config != "" {
		k += fmt.Sprintf(configPatch, indent(config, "        "))
	}
	return Module.Kustomize(ctx, root, dir, k)
}

// PushImages pushes Kueue's manager and agnhost, built by 'make
// cluster-binaries' into bin, to registry under the names Kueue's
// manifests and specs pull (images.KueueImage, images.AgnhostImage).
func PushImages(ctx context.Context, root, bin, registry string, log io.Writer) ([]string, error) {
	manager, err := images.PushKueue(ctx, filepath.Join(bin, "kueue"), registry)
	if err != nil {
		return nil, fmt.Errorf("the manager of Kueue (built by 'make cluster-binaries'): %w", err)
	}
	agnhost, err := images.PushAgnhost(ctx, root, filepath.Join(bin, "images"), filepath.Join(bin, "agnhost"), registry, log)
	if err != nil {
		return nil, fmt.Errorf("agnhost (built by 'make cluster-binaries'): %w", err)
	}
	return []string{manager, agnhost}, nil
}

// indent prefixes every line of s with prefix.
func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix) + "\n"
}
