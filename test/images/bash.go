package images

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Bash and Debian are the repositories and tags, in the local cluster's
// registry, of one image that suites and examples written for kind
// clusters run as docker.io/library/bash:latest (upstream JobSet's
// end-to-end suite) and docker.io/library/debian:12 (its in-place restart
// examples): the real nodes' containerd mirrors docker.io to that
// registry (cluster.MirroredRegistries). Debian 12's minimal system (bash,
// coreutils) and ping, where Docker Hub's bash is Alpine's bash and
// BusyBox.
const (
	Bash   = "library/bash:latest"
	Debian = "library/debian:12"
)

const bashScript = "hack/build-bash-rootfs.sh"

// PushBash builds the image (hack/build-bash-rootfs.sh, its layer cached
// in cacheDir by the script's digest) and pushes it to registry, a
// host:port serving plain HTTP, as Bash and as Debian. log receives the
// script's output. It returns the references it pushed.
func PushBash(ctx context.Context, root, cacheDir, registry string, log io.Writer) ([]string, error) {
	layer, err := debianLayer(ctx, root, cacheDir, log)
	if err != nil {
		return nil, err
	}
	// As Docker Hub's: bash, as root.
	img, err := configuredImage(func(c *v1.Config) {
		c.Cmd = []string{"bash"}
		c.Env = []string{debianPath}
	}, layer)
	if err != nil {
		return nil, err
	}
	var pushed []string
	for _, repo := range []string{Bash, Debian} {
		ref, err := push(ctx, img, registry, repo)
		if err != nil {
			return nil, err
		}
		pushed = append(pushed, ref)
	}
	return pushed, nil
}

const debianPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// debianLayer is the root file system hack/build-bash-rootfs.sh makes, as
// one layer, cached in cacheDir by the script's digest.
func debianLayer(ctx context.Context, root, cacheDir string, log io.Writer) (v1.Layer, error) {
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, err
	}
	script, err := os.ReadFile(filepath.Join(root, bashScript))
	if err != nil {
		return nil, err
	}
	base := filepath.Join(cacheDir, "bash-rootfs-"+digest(script)+".tar.gz")
	if _, err := os.Stat(base); err != nil {
		if err := buildRootFS(ctx, root, bashScript, base, log); err != nil {
			return nil, err
		}
	}
	return tarball.LayerFromFile(base)
}

// configuredImage is an image of layers for linux on this machine's architecture,
// its config set by config.
func configuredImage(config func(*v1.Config), layers ...v1.Layer) (v1.Image, error) {
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	config(&cf.Config)
	return mutate.ConfigFile(img, cf)
}

// push pushes img to registry, a host:port serving plain HTTP, as repo
// (path:tag), and returns its reference.
func push(ctx context.Context, img v1.Image, registry, repo string) (string, error) {
	ref, err := name.NewTag(registry+"/"+repo, name.Insecure)
	if err != nil {
		return "", err
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("pushing %s: %w", ref, err)
	}
	return ref.String(), nil
}
