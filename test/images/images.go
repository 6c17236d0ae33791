package images

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/inplace-dev/inplace/api/protocol"
)

// Image names, as config/ and the manager's configuration reference them.
// Tags other than latest make the kubelet's default pull policy
// IfNotPresent, which needs no registry once the image is imported.
const (
	Version   = "v0.1.0"
	Manager   = "ghcr.io/inplace-dev/inplace-manager:" + Version
	Agent     = "ghcr.io/inplace-dev/inplace-agent:" + Version
	Worker    = "ghcr.io/inplace-dev/inplace-testworker:" + Version
	Pause     = "ghcr.io/inplace-dev/inplace-pause:" + Version
	nonRootID = "65532"
)

// WorkerBinary is the test worker's path inside its image:
// `kubectl exec POD -c C -- /inplace-testworker exit 1` makes it exit.
const WorkerBinary = "/inplace-testworker"

type image struct {
	refs       []string
	pkg        string // the Go package of its entrypoint's binary
	binary     string // where the binary goes in the image
	entrypoint []string
	also       map[string]string // more binaries: path in the image by Go package
}

var all = []image{
	{refs: []string{Manager, "ghcr.io/inplace-dev/inplace-manager:latest"}, pkg: "./cmd/manager", binary: "/inplace-manager", entrypoint: []string{"/inplace-manager"}},
	{refs: []string{Agent, "ghcr.io/inplace-dev/inplace-agent:latest"}, pkg: "./cmd/agent", binary: "/inplace-agent", entrypoint: []string{"/inplace-agent"},
		also: map[string]string{"./cmd/supervisor": protocol.ImageSupervisorBinary}},
	{refs: []string{Worker}, pkg: "./test/cmd/testworker", binary: WorkerBinary, entrypoint: []string{WorkerBinary, "run"}},
	{refs: []string{Pause}, pkg: "./test/cmd/testworker", binary: WorkerBinary, entrypoint: []string{WorkerBinary, "pause"}},
}

// Build compiles the project's binaries statically and writes one image
// archive per image into dir (docker-archive format, every tag of the image
// in it), ready for `ctr images import`. It returns the archives' paths.
// root is the repository root.
func Build(ctx context.Context, root, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	binaries := map[string]string{}
	build := func(pkg, path string) error {
		if _, ok := binaries[pkg]; ok {
			return nil
		}
		out := filepath.Join(dir, filepath.Base(path))
		// Stamped as a release is (the Makefile's LDFLAGS), with the
		// version the images are tagged with.
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w -X github.com/inplace-dev/inplace/cmd/internal/version.version="+Version, "-o", out, pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if msg, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s: %w\n%s", pkg, err, msg)
		}
		binaries[pkg] = out
		return nil
	}
	for _, img := range all {
		if err := build(img.pkg, img.binary); err != nil {
			return nil, err
		}
		for pkg, path := range img.also {
			if err := build(pkg, path); err != nil {
				return nil, err
			}
		}
	}
	var archives []string
	for _, img := range all {
		tag, err := name.NewTag(img.refs[0])
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, filepath.Base(tag.RepositoryStr())+".tar")
		if err := write(img, binaries, path); err != nil {
			return nil, fmt.Errorf("writing the image %s: %w", img.refs[0], err)
		}
		archives = append(archives, path)
	}
	return archives, nil
}

// write builds an image of one layer — its binaries and an empty /tmp — that
// runs as a non-root user, as the Dockerfile's distroless images do.
func write(img image, binaries map[string]string, path string) error {
	entries := []entry{{path: "/tmp", mode: 0o1777, dir: true}}
	add := func(pkg, at string) error {
		data, err := os.ReadFile(binaries[pkg])
		if err != nil {
			return err
		}
		// layerOf writes its directories before it.
		entries = append(entries, entry{path: at, mode: 0o755, data: data})
		return nil
	}
	if err := add(img.pkg, img.binary); err != nil {
		return err
	}
	for _, pkg := range slices.Sorted(maps.Keys(img.also)) {
		if err := add(pkg, img.also[pkg]); err != nil {
			return err
		}
	}
	l, err := layerOf(entries...)
	if err != nil {
		return err
	}
	i, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return err
	}
	cf, err := i.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint = img.entrypoint
	cf.Config.User = nonRootID + ":" + nonRootID
	cf.Config.Env = []string{"PATH=/", "TMPDIR=/tmp"}
	if i, err = mutate.ConfigFile(i, cf); err != nil {
		return err
	}
	refs := map[name.Reference]v1.Image{}
	for _, r := range img.refs {
		tag, err := name.NewTag(r)
		if err != nil {
			return err
		}
		refs[tag] = i
	}
	return tarball.MultiRefWriteToFile(path, refs)
}

// entry is one directory or file of a layer.
type entry struct {
	path string // absolute
	mode int64
	data []byte
	dir  bool
}

// layerOf is a layer of the entries, in order, each file's parent
// directories readable by all. A fixed time: the same files give the same
// layer.
func layerOf(entries ...entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(0, 0)
	written := map[string]bool{}
	var writeDir func(dir string, mode int64) error
	writeDir = func(dir string, mode int64) error {
		if dir == "/" || written[dir] {
			return nil
		}
		if err := writeDir(filepath.Dir(dir), 0o755); err != nil {
			return err
		}
		written[dir] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir[1:] + "/", Mode: mode, ModTime: mtime})
	}
	for _, e := range entries {
		if e.dir {
			if err := writeDir(e.path, e.mode); err != nil {
				return nil, err
			}
			continue
		}
		if err := writeDir(filepath.Dir(e.path), 0o755); err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.path[1:], Mode: e.mode, Size: int64(len(e.data)), ModTime: mtime}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layer := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layer)), nil
	})
}
