package main

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCheckVersion(t *testing.T) {
	cases := map[string]struct {
		version string
		wantErr string
	}{
		"release":        {version: "v0.9.0"},
		"pre-release":    {version: "v1.0.0-rc.1"},
		"missing":        {version: "", wantErr: "make release VERSION=vX.Y.Z"},
		"no v":           {version: "0.9.0", wantErr: "want a semantic version"},
		"short":          {version: "v0.9", wantErr: "want a semantic version"},
		"build metadata": {version: "v0.9.0+abc", wantErr: "no build metadata"},
		"leading zero":   {version: "v0.09.0", wantErr: "want a semantic version"},
		"not a version":  {version: "latest", wantErr: "want a semantic version"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := checkVersion(tc.version)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("checkVersion(%q) = %v, want nil", tc.version, err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("checkVersion(%q) = %v, want an error saying %q", tc.version, err, tc.wantErr)
			}
		})
	}
}

func TestPinImages(t *testing.T) {
	const manifest = `kind: ConfigMap
data:
  config.yaml: |
    agent:
      image: ghcr.io/inplace-dev/inplace-agent:v0.1.0
---
kind: Deployment
spec:
  template:
    spec:
      containers:
      - image: ghcr.io/inplace-dev/inplace-manager:v0.1.0
      - image: "ghcr.io/inplace-dev/inplace-manager:latest"
`
	cases := map[string]struct {
		manifest string
		want     []string // substrings of the result
		wantErr  string
	}{
		"both pinned, whatever their tag": {
			manifest: manifest,
			want: []string{
				"image: ghcr.io/inplace-dev/inplace-agent:v0.9.0\n",
				"- image: ghcr.io/inplace-dev/inplace-manager:v0.9.0\n",
				`- image: "ghcr.io/inplace-dev/inplace-manager:v0.9.0"`,
			},
		},
		"no agent": {
			manifest: "image: ghcr.io/inplace-dev/inplace-manager:v0.1.0\n",
			wantErr:  "no reference to ghcr.io/inplace-dev/inplace-agent",
		},
		"an image the release does not ship": {
			manifest: manifest + "      - image: ghcr.io/inplace-dev/inplace-testworker:v0.1.0\n",
			wantErr:  "inplace-testworker",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := pinImages(tc.manifest, "v0.9.0")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("pinImages() error = %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("pinImages() lacks %q:\n%s", w, got)
				}
			}
			if strings.Contains(got, "v0.1.0") || strings.Contains(got, ":latest") {
				t.Errorf("pinImages() left a tag other than the release's:\n%s", got)
			}
		})
	}
}

func TestKrewManifest(t *testing.T) {
	got, err := krewManifest("v0.9.0", []cliArchive{
		{goos: "linux", goarch: "amd64", name: "kubectl-inplace_v0.9.0_linux_amd64.tar.gz", sha256: "abc"},
		{goos: "darwin", goarch: "arm64", name: "kubectl-inplace_v0.9.0_darwin_arm64.tar.gz", sha256: "def"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"kind: Plugin\n",
		"  name: inplace\n",
		"  version: v0.9.0\n",
		"    uri: https://github.com/inplace-dev/inplace/releases/download/v0.9.0/kubectl-inplace_v0.9.0_linux_amd64.tar.gz\n",
		"    sha256: abc\n",
		"        arch: arm64\n        os: darwin\n",
		"  - bin: kubectl-inplace\n",
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("the krew manifest lacks %q:\n%s", want, got)
		}
	}
}

// TestCLIArchiveHoldsRegularFilesOnly: krew refuses an archive with any
// other kind of entry (a symbolic link, say), and kubectl needs the binary
// and the completion helper executable.
func TestCLIArchiveHoldsRegularFilesOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plugin.tar.gz")
	if err := writeCLIArchive(path, []byte("binary"), []byte("license")); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	got := map[string]int64{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			t.Errorf("%s: tar type %q, want a regular file", h.Name, h.Typeflag)
		}
		got[h.Name] = h.Mode
	}
	want := map[string]int64{"kubectl-inplace": 0o755, "kubectl_complete-inplace": 0o755, "LICENSE": 0o644}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the archive's files and modes (-want +got):\n%s", diff)
	}
}

func TestCheckOut(t *testing.T) {
	root := t.TempDir()
	repo := filepath.Join(root, "repo")
	write := func(dir string, files map[string]string) string {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	write(repo, nil)
	cases := map[string]struct {
		out     string
		wantErr string
	}{
		"new":              {out: filepath.Join(repo, "dist")},
		"empty":            {out: write(filepath.Join(root, "empty"), nil)},
		"a former release": {out: write(filepath.Join(root, "former"), map[string]string{"SHA256SUMS": "abc  install.yaml\n", "install.yaml": "x"})},
		"the repository":   {out: repo, wantErr: "the repository is in it"},
		"above it":         {out: root, wantErr: "the repository is in it"},
		"not a release":    {out: write(filepath.Join(root, "home"), map[string]string{"notes.txt": "mine"}), wantErr: "holds no release"},
		"a file not of it": {out: write(filepath.Join(root, "mixed"), map[string]string{"SHA256SUMS": "abc  install.yaml\n", "install.yaml": "x", "notes.txt": "mine"}), wantErr: "notes.txt is not a file of the release"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := checkOut(tc.out, repo)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("checkOut(%s) = %v, want nil", tc.out, err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("checkOut(%s) = %v, want an error saying %q", tc.out, err, tc.wantErr)
			}
		})
	}
}
