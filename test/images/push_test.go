package images

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// fakeRelease writes into dir what BuildRelease writes for the two images,
// with random content: their archives and images.txt.
func fakeRelease(t *testing.T, dir, version string) map[string]v1.ImageIndex {
	t.Helper()
	indexes := map[string]v1.ImageIndex{}
	var list strings.Builder
	for _, repo := range []string{ManagerRepository, AgentRepository} {
		idx, err := random.Index(512, 2, 2)
		if err != nil {
			t.Fatal(err)
		}
		tag, err := name.NewTag(repo + ":" + version)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(tag.RepositoryStr())
		if err := writeOCIArchive(filepath.Join(t.TempDir(), base), filepath.Join(dir, fmt.Sprintf("%s-%s.tar", base, version)), tag, idx); err != nil {
			t.Fatal(err)
		}
		d, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&list, "%s@%s\n", tag, d)
		indexes[base] = idx
	}
	if err := os.WriteFile(filepath.Join(dir, ImagesFile), []byte(list.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return indexes
}

// insecure: the test registry speaks plain HTTP.
var insecure = []name.Option{name.Insecure}

// testRegistry is an OCI registry in memory; its host:port.
func testRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// TestPushRelease: each image reaches the registry whole, under the
// registry's path, with the digest images.txt names.
func TestPushRelease(t *testing.T) {
	dir := t.TempDir()
	want := fakeRelease(t, dir, "v1.2.3")
	host := testRegistry(t)
	pushed, err := PushRelease(context.Background(), dir, host+"/ml", insecure)
	if err != nil {
		t.Fatalf("PushRelease: %v", err)
	}
	if len(pushed) != 2 {
		t.Fatalf("pushed %v, want both images", pushed)
	}
	for _, p := range pushed {
		base := strings.TrimSuffix(filepath.Base(p.Ref), ":v1.2.3")
		if p.Ref != host+"/ml/"+base+":v1.2.3" {
			t.Errorf("pushed to %s, want %s/ml/%s:v1.2.3", p.Ref, host, base)
		}
		wantDigest, _ := want[base].Digest()
		if p.Digest != wantDigest.String() {
			t.Errorf("%s: digest %s, want %s", p.Ref, p.Digest, wantDigest)
		}
		ref, err := name.ParseReference(p.Ref+"@"+p.Digest, insecure...)
		if err != nil {
			t.Fatal(err)
		}
		got, err := remote.Index(ref)
		if err != nil {
			t.Fatalf("pulling %s by digest: %v", ref, err)
		}
		im, err := got.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range im.Manifests {
			img, err := got.Image(m.Digest)
			if err != nil {
				t.Fatal(err)
			}
			layers, err := img.Layers()
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range layers {
				// Read back: the registry holds every blob, not only
				// the manifests.
				rc, err := l.Compressed()
				if err != nil {
					t.Fatalf("%s: a layer of %s is missing: %v", p.Ref, m.Digest, err)
				}
				rc.Close()
			}
		}
	}
}

// TestPushReleaseRefusals: nothing is pushed from a release that does not
// read as its images.txt says, nor to a registry named with a scheme.
func TestPushReleaseRefusals(t *testing.T) {
	host := testRegistry(t)
	dir := t.TempDir()
	fakeRelease(t, dir, "v1.2.3")
	if _, err := PushRelease(context.Background(), dir, "https://"+host, insecure); err == nil || !strings.Contains(err.Error(), "without a scheme") {
		t.Errorf("a registry with a scheme: %v, want it refused", err)
	}
	// images.txt naming another digest for the agent.
	list, err := os.ReadFile(filepath.Join(dir, ImagesFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(list)), "\n")
	lines[1] = strings.SplitN(lines[1], "@", 2)[0] + "@sha256:" + strings.Repeat("0", 64)
	if err := os.WriteFile(filepath.Join(dir, ImagesFile), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pushed, err := PushRelease(context.Background(), dir, host, insecure)
	if err == nil || !strings.Contains(err.Error(), "does not hold the one image") {
		t.Errorf("an archive that is not the image images.txt names: %v, want it refused", err)
	}
	if len(pushed) != 0 {
		t.Errorf("pushed %v before refusing the release", pushed)
	}
	reg, err := name.NewRegistry(host, insecure...)
	if err != nil {
		t.Fatal(err)
	}
	repos, err := remote.Catalog(context.Background(), reg)
	if err != nil {
		t.Fatal(err)
	}
	if len(repos) != 0 {
		t.Errorf("the registry holds %v after a refused push, want nothing", repos)
	}
}

// TestPushReleaseRefusesAnAlteredArchive: an archive whose index blob was
// changed after the release is refused, though its index.json still names
// the digest images.txt does.
func TestPushReleaseRefusesAnAlteredArchive(t *testing.T) {
	host := testRegistry(t)
	dir := t.TempDir()
	indexes := fakeRelease(t, dir, "v1.2.3")
	d, err := indexes["inplace-agent"].Digest()
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "inplace-agent-v1.2.3.tar")
	work := t.TempDir()
	if err := untar(archive, work); err != nil {
		t.Fatal(err)
	}
	blob := filepath.Join(work, "blobs", "sha256", d.Hex)
	raw, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	// Still JSON, one byte more.
	raw = append(raw, ' ')
	if err := os.WriteFile(blob, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tarDir(work, archive); err != nil {
		t.Fatal(err)
	}
	pushed, err := PushRelease(context.Background(), dir, host, insecure)
	if err == nil || !strings.Contains(err.Error(), "was altered") {
		t.Errorf("an altered archive: %v, want it refused", err)
	}
	if len(pushed) != 0 {
		t.Errorf("pushed %v before refusing the release", pushed)
	}
}

// TestRepointManifest: every reference to the two images moves to the
// registry, tags kept; nothing else changes.
func TestRepointManifest(t *testing.T) {
	manifest := `      image: ghcr.io/inplace-dev/inplace-agent:v1.2.3
        image: ghcr.io/inplace-dev/inplace-manager:v1.2.3
        image: ghcr.io/inplace-dev/inplace-manager:v1.2.3
        image: registry.k8s.io/other:v1
`
	got, err := RepointManifest(manifest, "registry.example.com/ml")
	if err != nil {
		t.Fatal(err)
	}
	want := `      image: registry.example.com/ml/inplace-agent:v1.2.3
        image: registry.example.com/ml/inplace-manager:v1.2.3
        image: registry.example.com/ml/inplace-manager:v1.2.3
        image: registry.k8s.io/other:v1
`
	if got != want {
		t.Errorf("RepointManifest:\n%s\nwant:\n%s", got, want)
	}
	if _, err := RepointManifest("image: registry.k8s.io/other:v1\n", "r.example.com"); err == nil {
		t.Error("a manifest naming neither image was repointed, want an error")
	}
}
