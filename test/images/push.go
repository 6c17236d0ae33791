package images

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Pushed is one image of a release, pushed.
type Pushed struct {
	Ref    string // REGISTRY/inplace-manager:VERSION
	Digest string // the same as the release's images.txt names
}

// ImagesFile lists a release's images by digest, one ref@digest a line.
const ImagesFile = "images.txt"

// PushRelease pushes the images of the release in dir (written by
// BuildRelease: images.txt and an OCI archive per image) to registry, a
// host[:port] with an optional path ("registry.example.com/ml"), under
// their repository's last element and the release's tag:
// ghcr.io/inplace-dev/inplace-agent:TAG goes to
// registry.example.com/ml/inplace-agent:TAG. Each image is pushed
// whole (its index, every platform's manifest and blob) and must keep the
// digest images.txt names, so that a manifest pinned by digest finds it.
// Nothing is pushed unless every archive reads as images.txt says.
func PushRelease(ctx context.Context, dir, registry string, nameOpts []name.Option, opts ...remote.Option) ([]Pushed, error) {
	if strings.Contains(registry, "://") || strings.HasSuffix(registry, "/") || registry == "" {
		return nil, fmt.Errorf("registry %q: want host[:port][/path], without a scheme or a trailing slash", registry)
	}
	refs, err := readImages(filepath.Join(dir, ImagesFile))
	if err != nil {
		return nil, err
	}
	type push struct {
		to     name.Tag
		digest string
		index  func() error
	}
	var pushes []push
	for _, r := range refs {
		ref, digest, ok := strings.Cut(r, "@")
		if !ok {
			return nil, fmt.Errorf("%s: %q names no digest", ImagesFile, r)
		}
		if _, err := v1.NewHash(digest); err != nil {
			return nil, fmt.Errorf("%s: %q: %w", ImagesFile, r, err)
		}
		tagged, err := name.NewTag(ref, name.StrictValidation)
		if err != nil {
			return nil, fmt.Errorf("%s: %q names no tag: %w", ImagesFile, r, err)
		}
		base := path.Base(tagged.RepositoryStr())
		archive := filepath.Join(dir, fmt.Sprintf("%s-%s.tar", base, tagged.TagStr()))
		to, err := name.NewTag(pushedRepository(registry, tagged.RepositoryStr())+":"+tagged.TagStr(), nameOpts...)
		if err != nil {
			return nil, fmt.Errorf("registry %q: %w", registry, err)
		}
		work, err := os.MkdirTemp("", "inplace-push-")
		if err != nil {
			return nil, err
		}
		// Removed when every image is pushed, not before: the layout
		// reads its blobs as they are pushed.
		defer os.RemoveAll(work)
		if err := untar(archive, work); err != nil {
			return nil, err
		}
		p, err := layout.FromPath(work)
		if err != nil {
			return nil, fmt.Errorf("%s is not an OCI image layout: %w", archive, err)
		}
		outer, err := p.ImageIndex()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", archive, err)
		}
		im, err := outer.IndexManifest()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", archive, err)
		}
		if len(im.Manifests) != 1 || im.Manifests[0].Digest.String() != digest {
			return nil, fmt.Errorf("%s does not hold the one image %s names (%s)", archive, ImagesFile, digest)
		}
		index, err := outer.ImageIndex(im.Manifests[0].Digest)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", archive, err)
		}
		// The layout does not hash what it reads, nor does a registry
		// check an index pushed by tag: hash it here.
		got, err := index.Digest()
		if err != nil {
			return nil, fmt.Errorf("%s: hashing the image's index: %w", archive, err)
		}
		if got.String() != digest {
			return nil, fmt.Errorf("%s: the image's index hashes to %s, not the %s that %s names: the archive was altered", archive, got, digest, ImagesFile)
		}
		pushes = append(pushes, push{to: to, digest: digest, index: func() error {
			return remote.WriteIndex(to, index, append([]remote.Option{remote.WithContext(ctx)}, opts...)...)
		}})
	}
	var out []Pushed
	for _, p := range pushes {
		if err := p.index(); err != nil {
			return out, fmt.Errorf("pushing %s: %w", p.to, err)
		}
		out = append(out, Pushed{Ref: p.to.String(), Digest: p.digest})
	}
	return out, nil
}

// readImages reads images.txt.
func readImages(file string) ([]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("%w (make release writes it)", err)
	}
	defer f.Close()
	var refs []string
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		if l := strings.TrimSpace(lines.Text()); l != "" {
			refs = append(refs, l)
		}
	}
	if err := lines.Err(); err != nil {
		return nil, err
	}
	if len(refs) == 0 {
		return nil, fmt.Errorf("%s lists no image", file)
	}
	return refs, nil
}

// untar extracts the archive tarDir wrote into dir: regular files and
// directories, each under dir.
func untar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", archive, err)
		}
		if !filepath.IsLocal(hdr.Name) {
			return fmt.Errorf("reading %s: %q leaves the archive", archive, hdr.Name)
		}
		target := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, tr); err != nil {
				out.Close()
				return err
			}
			if err := out.Close(); err != nil {
				return err
			}
		default:
			return fmt.Errorf("reading %s: %q is neither a file nor a directory", archive, hdr.Name)
		}
	}
}

// pushedRepository is where PushRelease pushes the images of repository:
// under registry, by the repository's last element.
func pushedRepository(registry, repository string) string {
	return registry + "/" + path.Base(repository)
}

// InstallManifests are a release's install manifests, which name the
// images it ships.
var InstallManifests = []string{"install.yaml", "install-selfsigned.yaml"}

// RepointManifest returns a release's install manifest with every
// reference to the two images moved to registry, as PushRelease pushed
// them (their tags kept); it fails if the manifest names neither image.
func RepointManifest(manifest, registry string) (string, error) {
	out := manifest
	for _, repo := range []string{ManagerRepository, AgentRepository} {
		if !strings.Contains(out, repo+":") {
			return "", fmt.Errorf("the manifest names no %s image", repo)
		}
		out = strings.ReplaceAll(out, repo+":", pushedRepository(registry, repo)+":")
	}
	return out, nil
}

// RepointManifests writes the release's install manifests in dir, moved to
// registry (RepointManifest), into out.
func RepointManifests(dir, registry, out string) ([]string, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	var written []string
	for _, m := range InstallManifests {
		raw, err := os.ReadFile(filepath.Join(dir, m))
		if err != nil {
			return written, err
		}
		moved, err := RepointManifest(string(raw), registry)
		if err != nil {
			return written, fmt.Errorf("%s: %w", m, err)
		}
		target := filepath.Join(out, m)
		if err := os.WriteFile(target, []byte(moved), 0o644); err != nil {
			return written, err
		}
		written = append(written, target)
	}
	return written, nil
}
