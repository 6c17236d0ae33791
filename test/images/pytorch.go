package images

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// PyTorch is the image of examples/pytorch: Debian's python3-torch (CPU,
// gloo, torchrun), the example's training program and python/'s
// inplace_restart module.
const PyTorch = "ghcr.io/inplace-dev/inplace-pytorch:" + Version

const rootfsScript = "hack/build-pytorch-rootfs.sh"

// pytorchLayout names the image's config as BuildPyTorch writes it (user,
// environment, working directory): change it with them, or a cached
// archive of the old config is used.
const pytorchLayout = "1"

// pytorchPrograms are the files of examples/pytorch the image holds, at
// the same path under /.
var pytorchPrograms = []string{"train.py", "torchrun.py"}

// PyTorchImage is a built PyTorch image archive.
type PyTorchImage struct {
	// Archive is the docker-archive, ready for `ctr images import`.
	Archive string
	// Size is the image's size as pulled: its compressed layers (from
	// a cached archive, the archive's size, a few kB more).
	Size int64
	// Cached says the root file system layer came from cacheDir.
	Cached bool
}

// BuildPyTorch writes the PyTorch image to archive without a container
// engine: hack/build-pytorch-rootfs.sh makes a Debian root file system,
// which becomes one layer, and the example's programs a second one. The
// first layer is cached in cacheDir by the script's digest, so that only
// the first build takes minutes; log receives the script's output.
func BuildPyTorch(ctx context.Context, root, cacheDir, archive string, log io.Writer) (PyTorchImage, error) {
	var out PyTorchImage
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return out, err
	}
	script, err := os.ReadFile(filepath.Join(root, rootfsScript))
	if err != nil {
		return out, err
	}
	// One build at a time: the test packages of `make test` run side by
	// side, and two may build the image at once.
	lock, err := os.OpenFile(filepath.Join(cacheDir, "inplace-pytorch.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return out, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return out, err
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	base := filepath.Join(cacheDir, "pytorch-rootfs-"+digest(script)+".tar.gz")
	if _, err := os.Stat(base); err == nil {
		out.Cached = true
	} else {
		if err := buildRootFS(ctx, root, rootfsScript, base, log); err != nil {
			return out, err
		}
	}
	var programs []entry
	for _, f := range pytorchPrograms {
		data, err := os.ReadFile(filepath.Join(root, "examples", "pytorch", f))
		if err != nil {
			return out, err
		}
		programs = append(programs, entry{path: "/examples/pytorch/" + f, mode: 0o644, data: data})
	}
	// The worker side of in-process restarts, where Debian's python3 finds
	// its modules.
	module, err := os.ReadFile(filepath.Join(root, "python", "inplace_restart.py"))
	if err != nil {
		return out, err
	}
	programs = append(programs, entry{path: "/usr/lib/python3/dist-packages/inplace_restart.py", mode: 0o644, data: module})
	// Writing the archive reads the root file system's layer whole and
	// decompresses it for its diff ID: a minute or two of CPU. The archive
	// is kept in cacheDir under a digest of what goes in it (the root file
	// system's layer by its size and time: one built again makes a new
	// archive), and linked to archive.
	baseInfo, err := os.Stat(base)
	if err != nil {
		return out, err
	}
	inputs := append([]byte(fmt.Sprintf("%s\x00%s\x00%d\x00%d\x00", PyTorch, pytorchLayout, baseInfo.Size(), baseInfo.ModTime().UnixNano())), script...)
	for _, p := range programs {
		inputs = append(append(inputs, p.path...), p.data...)
	}
	cached := filepath.Join(cacheDir, "inplace-pytorch-"+digest(inputs)+".tar")
	out.Archive = archive
	if fi, err := os.Stat(cached); err == nil {
		out.Size, out.Cached = fi.Size(), true
		return out, linkOrCopy(cached, archive)
	}
	rootfs, err := tarball.LayerFromFile(base)
	if err != nil {
		return out, err
	}
	programLayer, err := layerOf(nil, programs...)
	if err != nil {
		return out, err
	}
	img, err := mutate.AppendLayers(empty.Image, rootfs, programLayer)
	if err != nil {
		return out, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return out, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Cmd = []string{"python3"}
	// Not root: nothing in training needs it. HOME and the working
	// directory are writable by any user; Python's output is unbuffered so
	// that every step's line reaches the log as it happens.
	cf.Config.User = nonRootID + ":" + nonRootID
	cf.Config.WorkingDir = "/tmp"
	cf.Config.Env = []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/tmp",
		"PYTHONUNBUFFERED=1",
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return out, err
	}
	for _, l := range []v1.Layer{rootfs, programLayer} {
		n, err := l.Size()
		if err != nil {
			return out, err
		}
		out.Size += n
	}
	tag, err := name.NewTag(PyTorch)
	if err != nil {
		return out, err
	}
	tmp := cached + ".tmp"
	if err := tarball.MultiRefWriteToFile(tmp, map[name.Reference]v1.Image{tag: img}); err != nil {
		_ = os.Remove(tmp)
		return out, err
	}
	if err := os.Rename(tmp, cached); err != nil {
		return out, err
	}
	// One archive is kept: those of older inputs go, and what a killed
	// build left.
	old, _ := filepath.Glob(filepath.Join(cacheDir, "inplace-pytorch-*.tar*"))
	for _, o := range old {
		if o != cached {
			_ = os.Remove(o)
		}
	}
	return out, linkOrCopy(cached, archive)
}

// linkOrCopy makes dst hold src's bytes: a hard link where both are on
// one file system, a copy otherwise.
func linkOrCopy(src, dst string) error {
	// dst may be a link to src already: never written through.
	if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

// buildRootFS runs script (a path under root) into a directory beside
// layer, packs the directory as a gzip layer at layer and removes it.
func buildRootFS(ctx context.Context, root, script, layer string, log io.Writer) error {
	dir, err := os.MkdirTemp(filepath.Dir(layer), "rootfs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cmd := exec.CommandContext(ctx, filepath.Join(root, script), dir)
	cmd.Stdout, cmd.Stderr = log, log
	// Stopped, debootstrap unmounts what it mounted under dir before it
	// exits; killed, it would leave those mounts behind. The signal goes
	// to the script's process group: debootstrap too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = time.Minute
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", script, err)
	}
	tmp := dir + ".tar.gz"
	defer os.Remove(tmp)
	if err := packDir(dir, tmp); err != nil {
		return fmt.Errorf("packing %s: %w", dir, err)
	}
	return os.Rename(tmp, layer)
}

// packDir writes dir as a gzip-compressed tar layer: owners, modes,
// symbolic and hard links as they are, device nodes left out (the runtime
// gives every container its own /dev). The fastest compression: the layer
// is imported locally, where packing time counts more than its size.
func packDir(dir, path string) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	zw, err := gzip.NewWriterLevel(f, gzip.BestSpeed)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	links := map[uint64]string{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		mode := fi.Mode()
		if mode&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe|fs.ModeSocket) != 0 {
			return nil
		}
		var target string
		if mode&fs.ModeSymlink != 0 {
			if target, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, target)
		if err != nil {
			return err
		}
		hdr.Name, hdr.Uname, hdr.Gname = rel, "", ""
		if d.IsDir() {
			hdr.Name += "/"
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && mode.IsRegular() && st.Nlink > 1 {
			if first, seen := links[st.Ino]; seen {
				hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
			} else {
				links[st.Ino] = rel
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}
