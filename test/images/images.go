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
// Version is the tree's, as the file VERSION at the repository's root says
// it (hack/release's tests check that they agree).
const (
	Version   = "v0.10.0"
	Manager   = ManagerRepository + ":" + Version
	Agent     = AgentRepository + ":" + Version
	Worker    = "ghcr.io/inplace-dev/inplace-testworker:" + Version
	Pause     = "ghcr.io/inplace-dev/inplace-pause:" + Version
	nonRootID = "65532"
)

// versionPkg is where the linker stamps a binary's version and commit.
const versionPkg = "github.com/inplace-dev/inplace/cmd/internal/version"

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

var (
	managerImage = image{refs: []string{Manager, ManagerRepository + ":latest"}, pkg: "./cmd/manager", binary: "/inplace-manager", entrypoint: []string{"/inplace-manager"}}
	agentImage   = image{refs: []string{Agent, AgentRepository + ":latest"}, pkg: "./cmd/agent", binary: "/inplace-agent", entrypoint: []string{"/inplace-agent"},
		also: map[string]string{"./cmd/supervisor": protocol.ImageSupervisorBinary}}
	all = []image{
		managerImage,
		agentImage,
		{refs: []string{Worker}, pkg: "./test/cmd/testworker", binary: WorkerBinary, entrypoint: []string{WorkerBinary, "run"}},
		{refs: []string{Pause}, pkg: "./test/cmd/testworker", binary: WorkerBinary, entrypoint: []string{WorkerBinary, "pause"}},
	}
)

// tagged is img under refs alone.
func (img image) tagged(refs ...string) image {
	img.refs = refs
	return img
}

// Build compiles the project's binaries statically and writes one image
// archive per image into dir (docker-archive format, every tag of the image
// in it), ready for `ctr images import`. It returns the archives' paths.
// root is the repository root.
func Build(ctx context.Context, root, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// Stamped as a release is (the Makefile's LDFLAGS), with the version
	// the images are tagged with.
	binaries, err := buildBinaries(ctx, root, dir, all, runtime.GOARCH, Version, "")
	if err != nil {
		return nil, err
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

// buildBinaries compiles, for linux/goarch, every binary the images need
// into dir, stamped with version and commit; it returns their paths by Go
// package.
func buildBinaries(ctx context.Context, root, dir string, imgs []image, goarch, version, commit string) (map[string]string, error) {
	binaries := map[string]string{}
	build := func(pkg, path string) error {
		if _, ok := binaries[pkg]; ok {
			return nil
		}
		out := filepath.Join(dir, filepath.Base(path))
		ldflags := "-s -w -X " + versionPkg + ".version=" + version
		if commit != "" {
			ldflags += " -X " + versionPkg + ".commit=" + commit
		}
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags="+ldflags, "-o", out, pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
		if msg, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s for linux/%s: %w\n%s", pkg, goarch, err, msg)
		}
		binaries[pkg] = out
		return nil
	}
	for _, img := range imgs {
		if err := build(img.pkg, img.binary); err != nil {
			return nil, err
		}
		for _, pkg := range slices.Sorted(maps.Keys(img.also)) {
			if err := build(pkg, img.also[pkg]); err != nil {
				return nil, err
			}
		}
	}
	return binaries, nil
}

// write writes the image of img, tagged with every one of its refs, as a
// docker archive at path.
func write(img image, binaries map[string]string, path string) error {
	i, err := imageOf(img, binaries, runtime.GOARCH)
	if err != nil {
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

// imageOf builds an image of one layer — its binaries and an empty /tmp —
// that runs as a non-root user, as the Dockerfile's distroless images do.
// layerOpts set its layer's media type, say.
func imageOf(img image, binaries map[string]string, goarch string, layerOpts ...tarball.LayerOption) (v1.Image, error) {
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
		return nil, err
	}
	for _, pkg := range slices.Sorted(maps.Keys(img.also)) {
		if err := add(pkg, img.also[pkg]); err != nil {
			return nil, err
		}
	}
	l, err := layerOf(layerOpts, entries...)
	if err != nil {
		return nil, err
	}
	i, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return nil, err
	}
	cf, err := i.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", goarch
	cf.Config.Entrypoint = img.entrypoint
	cf.Config.User = nonRootID + ":" + nonRootID
	cf.Config.Env = []string{"PATH=/", "TMPDIR=/tmp"}
	return mutate.ConfigFile(i, cf)
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
func layerOf(opts []tarball.LayerOption, entries ...entry) (v1.Layer, error) {
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
	}, opts...)
}
