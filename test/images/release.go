package images

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Repositories of the two images a release ships; config/ and the chart
// name them with the release's tag.
const (
	ManagerRepository = "ghcr.io/inplace-dev/inplace-manager"
	AgentRepository   = "ghcr.io/inplace-dev/inplace-agent"
)

// Annotations of an OCI image layout's index.json that name the image:
// containerd's importer (ctr images import, nerdctl load) reads the first,
// and docker load since 25.0 as well; tools of the OCI image spec (skopeo's
// oci-archive:, crane) read the second, the tag alone.
const (
	annotationContainerdName = "io.containerd.image.name"
	annotationOCIRefName     = "org.opencontainers.image.ref.name"
)

// ReleaseImage is one image archive of a release.
type ReleaseImage struct {
	Ref     string // e.g. ghcr.io/inplace-dev/inplace-manager:v0.10.0
	Digest  string // its index's, sha256:...: Ref@Digest names it in any registry it is pushed to
	Archive string // its OCI archive
}

// BuildRelease compiles the manager and the agent for every platform of
// goarchs (linux only: the images run on Nodes) stamped with version and
// commit, and writes one OCI archive per image into dir, named
// inplace-manager-VERSION.tar and inplace-agent-VERSION.tar: an OCI image
// layout whose index names the image ref (an index of one image per
// platform). The images are those of the local cluster's, under the
// release's tag.
func BuildRelease(ctx context.Context, root, dir, version, commit string, goarchs []string) ([]ReleaseImage, error) {
	if len(goarchs) == 0 {
		return nil, fmt.Errorf("no platform to build for")
	}
	work, err := os.MkdirTemp("", "inplace-release-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	release := []image{
		managerImage.tagged(ManagerRepository + ":" + version),
		agentImage.tagged(AgentRepository + ":" + version),
	}
	// Each image's manifests by platform, in goarchs' order.
	manifests := make([][]mutate.IndexAddendum, len(release))
	for _, goarch := range goarchs {
		bins := filepath.Join(work, goarch)
		if err := os.MkdirAll(bins, 0o755); err != nil {
			return nil, err
		}
		binaries, err := buildBinaries(ctx, root, bins, release, goarch, version, commit)
		if err != nil {
			return nil, err
		}
		for i, img := range release {
			built, err := imageOf(img, binaries, goarch, tarball.WithMediaType(types.OCILayer))
			if err != nil {
				return nil, fmt.Errorf("the image %s for linux/%s: %w", img.refs[0], goarch, err)
			}
			// OCI media types throughout, as the index and the layout
			// that hold them.
			built = mutate.ConfigMediaType(mutate.MediaType(built, types.OCIManifestSchema1), types.OCIConfigJSON)
			manifests[i] = append(manifests[i], mutate.IndexAddendum{
				Add:        built,
				Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: goarch}},
			})
		}
	}
	var out []ReleaseImage
	for i, img := range release {
		tag, err := name.NewTag(img.refs[0])
		if err != nil {
			return nil, err
		}
		archive := filepath.Join(dir, fmt.Sprintf("%s-%s.tar", filepath.Base(tag.RepositoryStr()), version))
		index := mutate.IndexMediaType(mutate.AppendManifests(empty.Index, manifests[i]...), types.OCIImageIndex)
		if err := writeOCIArchive(filepath.Join(work, "layout-"+filepath.Base(tag.RepositoryStr())), archive, tag, index); err != nil {
			return nil, fmt.Errorf("writing the image %s: %w", img.refs[0], err)
		}
		digest, err := index.Digest()
		if err != nil {
			return nil, err
		}
		out = append(out, ReleaseImage{Ref: tag.String(), Digest: digest.String(), Archive: archive})
	}
	return out, nil
}

// writeOCIArchive lays index out as an OCI image layout in dir, named tag,
// and writes that layout as a tar at archive.
func writeOCIArchive(dir, archive string, tag name.Tag, index v1.ImageIndex) error {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(index, layout.WithAnnotations(map[string]string{
		annotationContainerdName: tag.String(),
		annotationOCIRefName:     tag.TagStr(),
	})); err != nil {
		return err
	}
	return tarDir(dir, archive)
}

// tarDir writes the files under dir into a tar at path, in lexical order
// with a fixed time and owner: the same files give the same archive.
func tarDir(dir, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	walkErr := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		hdr := &tar.Header{Name: rel, ModTime: time.Unix(0, 0), Mode: 0o644, Format: tar.FormatPAX}
		if d.IsDir() {
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, rel+"/", 0o755
			return tw.WriteHeader(hdr)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, info.Size()
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err := tw.Close(); walkErr == nil {
		walkErr = err
	}
	if err := f.Close(); walkErr == nil {
		walkErr = err
	}
	if walkErr != nil {
		os.Remove(path)
		return fmt.Errorf("archiving %s: %w", dir, walkErr)
	}
	return nil
}

// Goarch is a release platform's architecture: "linux/arm64" → "arm64".
func Goarch(platform string) (string, error) {
	os, arch, ok := strings.Cut(platform, "/")
	if !ok || os != "linux" || arch == "" || strings.Contains(arch, "/") {
		return "", fmt.Errorf("platform %q: want linux/ARCH, e.g. linux/amd64 (the images run on Linux Nodes)", platform)
	}
	return arch, nil
}
