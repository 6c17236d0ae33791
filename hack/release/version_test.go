package main

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A version of this project as the tree writes it: with its v, or without
// it as the chart's version is.
const (
	semverV     = `v\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?`
	semverPlain = `\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?`
)

// pinRule is one way a file names this project's version: re's first group
// is the version, in the files that files accepts.
type pinRule struct {
	name  string
	files func(path string) bool
	re    *regexp.Regexp
	plain bool // written without its v
}

// notHistory is any file but the CHANGELOG, whose sections name the
// releases they were.
func notHistory(path string) bool { return path != "CHANGELOG.md" }

// isDoc is a page a reader follows.
func isDoc(path string) bool {
	return strings.HasSuffix(path, ".md") && notHistory(path)
}

// isReleasePage is a page whose example is the tree's release, so that a
// version in its prose is the tree's: the tutorial shows what the plugin
// built from the tree says. Elsewhere such a version may be a past
// release's (upgrade notes, say) or another project's.
func isReleasePage(path string) bool {
	return path == "README.md" || path == "docs/how-to/release.md" || path == "charts/inplace/README.md" ||
		path == "docs/tutorials/first-in-place-jobset.md"
}

func only(name string) func(string) bool {
	return func(path string) bool { return path == name }
}

// pinRules are every way the tree names its own version: its images'
// tags, its remote kustomizations' refs, the chart's versions, the test
// images' tag, and a release's files and commands in the docs.
// Third-party versions (Kubernetes', a Go module's) match none of them.
var pinRules = []pinRule{
	{name: "image tag", files: notHistory, re: regexp.MustCompile(`ghcr\.io/inplace-dev/inplace-[a-z0-9-]+:(` + semverV + `)`)},
	{name: "kustomize newTag", files: notHistory, re: regexp.MustCompile(`name:\s*ghcr\.io/inplace-dev/inplace-[a-z0-9-]+\s*\n\s*newTag:\s*"?(` + semverV + `)`)},
	{name: "remote ref", files: notHistory, re: regexp.MustCompile(`github\.com/inplace-dev/inplace(?://[^\s?]*\?ref=|/releases/(?:download|tag)/)(` + semverV + `)`)},
	{name: "chart version", files: only("charts/inplace/Chart.yaml"), re: regexp.MustCompile(`(?m)^version:\s*"?(` + semverPlain + `)`), plain: true},
	{name: "chart appVersion", files: only("charts/inplace/Chart.yaml"), re: regexp.MustCompile(`(?m)^appVersion:\s*"?(` + semverV + `)`)},
	{name: "test images' tag", files: only("test/images/images.go"), re: regexp.MustCompile(`\bVersion\s*=\s*"(` + semverV + `)"`)},
	{name: "make VERSION", files: isDoc, re: regexp.MustCompile(`\bVERSION=(` + semverV + `)`)},
	{name: "git tag", files: isDoc, re: regexp.MustCompile(`git tag (?:-[a-z] )*(` + semverV + `)`)},
	{name: "release name", files: isReleasePage, re: regexp.MustCompile(`\binplace (` + semverV + `)`)},
	{name: "chart archive", files: isDoc, re: regexp.MustCompile(`\binplace-(` + semverPlain + `)\.tgz`), plain: true},
	{name: "image archive", files: isDoc, re: regexp.MustCompile(`\binplace-(?:manager|agent)-(` + semverV + `)\.tar`)},
	{name: "plugin archive", files: isDoc, re: regexp.MustCompile(`\bkubectl-inplace_(` + semverV + `)_`)},
	{name: "chart field", files: isDoc, re: regexp.MustCompile("`version: (" + semverPlain + ")`"), plain: true},
	{name: "chart field", files: isDoc, re: regexp.MustCompile("`appVersion: (" + semverV + ")`")},
	{name: "tag by digest", files: isReleasePage, re: regexp.MustCompile(`:(` + semverV + `)@sha256:`)},
	{name: "version", files: isReleasePage, re: regexp.MustCompile("`(" + semverV + ")`")},
}

// pin is one place that names a version of the project.
type pin struct {
	path string
	line int
	rule string
	got  string // as written
	want string // the tree's version, as that place writes it
}

func (p pin) String() string {
	return fmt.Sprintf("%s:%d: %s %s, want %s", p.path, p.line, p.rule, p.got, p.want)
}

// findPins returns every place of files (contents by path) that names a
// version of the project, each with the version it should name.
func findPins(files map[string][]byte, version string) []pin {
	var pins []pin
	for _, path := range slices.Sorted(maps.Keys(files)) {
		data := files[path]
		seen := map[int]bool{} // by offset: two rules may match one place
		for _, r := range pinRules {
			if !r.files(path) {
				continue
			}
			for _, m := range r.re.FindAllSubmatchIndex(data, -1) {
				if seen[m[2]] {
					continue
				}
				seen[m[2]] = true
				want := version
				if r.plain {
					want = strings.TrimPrefix(version, "v")
				}
				pins = append(pins, pin{
					path: path,
					line: 1 + bytes.Count(data[:m[2]], []byte("\n")),
					rule: r.name,
					got:  string(data[m[2]:m[3]]),
					want: want,
				})
			}
		}
	}
	slices.SortStableFunc(pins, func(a, b pin) int {
		if c := strings.Compare(a.path, b.path); c != 0 {
			return c
		}
		return a.line - b.line
	})
	return pins
}

// changelogRelease is a release's section heading of CHANGELOG.md; an
// "Unreleased" one above it names no version.
var changelogRelease = regexp.MustCompile(`(?m)^## (` + semverV + `)\s*$`)

// mustPin are the files that name the version whatever else changes: a
// rule that stops finding it there has gone stale.
var mustPin = []string{
	"charts/inplace/Chart.yaml",
	"config/default/kustomization.yaml",
	"config/manager/config.yaml",
	"config/manager/manager.yaml",
	"config/selfsigned/config.yaml",
	"config/selfsigned/kustomization.yaml",
	"docs/how-to/install.md",
	"docs/how-to/release.md",
	"test/images/images.go",
}

// trackedFiles are the files of the tree that may name the version: every
// tracked text file but the Go modules' (other modules' versions) and the
// tests' inputs and examples.
func trackedFiles(t *testing.T, root string) map[string][]byte {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("not a git work tree: %v", err)
	}
	files := map[string][]byte{}
	for path := range strings.SplitSeq(strings.TrimRight(string(out), "\x00"), "\x00") {
		base := filepath.Base(path)
		if base == "go.mod" || base == "go.sum" || strings.HasSuffix(path, "_test.go") || strings.Contains("/"+path, "/testdata/") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, path))
		if os.IsNotExist(err) {
			continue // deleted, not yet committed
		} else if err != nil {
			t.Fatal(err)
		}
		if bytes.IndexByte(data, 0) >= 0 {
			continue // not text
		}
		files[path] = data
	}
	return files
}

// TestTreeNamesItsVersion checks that every file that names the project's
// version (its images' tags, the chart's version and appVersion, the
// remote kustomizations' refs, the test images' tag, the docs' release
// commands and files, the CHANGELOG's newest release) names the one in
// VERSION, and that the Makefile reads it from there. On a release, write
// the new version into VERSION: this test names every file and line left
// to change.
func TestTreeNamesItsVersion(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	version, err := treeVersion(root)
	if err != nil {
		t.Fatal(err)
	}
	files := trackedFiles(t, root)

	found := map[string]bool{}
	for _, p := range findPins(files, version) {
		found[p.path] = true
		if p.got != p.want {
			t.Errorf("%s (%s says %s)", p, versionFile, version)
		}
	}
	for _, path := range mustPin {
		if !found[path] {
			t.Errorf("%s names no version of the project: a rule of pinRules no longer finds it there", path)
		}
	}

	if m := changelogRelease.FindSubmatch(files["CHANGELOG.md"]); m == nil {
		t.Errorf("CHANGELOG.md: no release section (## vX.Y.Z)")
	} else if string(m[1]) != version {
		line := 1 + bytes.Count(files["CHANGELOG.md"][:bytes.Index(files["CHANGELOG.md"], m[0])], []byte("\n"))
		t.Errorf("CHANGELOG.md:%d: the newest release is %s, want %s (%s says so)", line, m[1], version, versionFile)
	}

	const makeVersion = "VERSION ?= $(shell cat " + versionFile + ")"
	if !slices.Contains(strings.Split(string(files["Makefile"]), "\n"), makeVersion) {
		t.Errorf("Makefile: no line %q: its default VERSION is not read from %s", makeVersion, versionFile)
	}
}

func TestFindPins(t *testing.T) {
	cases := map[string]struct {
		files     map[string]string
		wantFound int      // pins found, agreeing or not
		want      []string // pins that disagree, as pin.String says them
	}{
		"every kind, agreeing": {
			files: map[string]string{
				"config/default/kustomization.yaml": "images:\n- name: ghcr.io/inplace-dev/inplace-manager\n  newTag: v1.2.3\n",
				"config/manager/config.yaml":        "agent:\n  image: ghcr.io/inplace-dev/inplace-agent:v1.2.3\n",
				"charts/inplace/Chart.yaml":         "name: inplace\nversion: 1.2.3\nappVersion: v1.2.3\n",
				"test/images/images.go":             "const (\n\tVersion   = \"v1.2.3\"\n)\n",
				"docs/how-to/install.md":            "resources: [https://github.com/inplace-dev/inplace//config/default?ref=v1.2.3]\n",
				"docs/how-to/release.md": "`make release VERSION=v1.2.3`, `inplace-1.2.3.tgz`, `inplace-agent-v1.2.3.tar`,\n" +
					"kubectl-inplace_v1.2.3_linux_amd64.tar.gz, `version: 1.2.3`, `appVersion: v1.2.3`, pinned to `v1.2.3`,\n" +
					"REPOSITORY:v1.2.3@sha256:..., git tag -s v1.2.3 -m \"inplace v1.2.3\"\n",
			},
			wantFound: 16,
		},
		"every kind, another version": {
			files: map[string]string{
				"config/default/kustomization.yaml":     "images:\n- name: ghcr.io/inplace-dev/inplace-manager\n  newTag: v0.1.0\n",
				"charts/inplace/Chart.yaml":             "name: inplace\nversion: 0.1.0\nappVersion: v0.1.0\n",
				"test/images/images.go":                 "const (\n\tVersion   = \"v0.1.0\"\n)\n",
				"docs/how-to/install.md":                "text\nresources: [https://github.com/inplace-dev/inplace//config/default?ref=v0.1.0]\n",
				"docs/how-to/release.md":                "`make release VERSION=v1.2.3-rc.1`\n`inplace-0.1.0.tgz` and `inplace-manager-v0.1.0.tar`\npinned to `v0.1.0`\n",
				"examples/in-place-restart/jobset.yaml": "containers:\n- image: ghcr.io/inplace-dev/inplace-testworker:v0.1.0\n",
			},
			want: []string{
				"charts/inplace/Chart.yaml:2: chart version 0.1.0, want 1.2.3",
				"charts/inplace/Chart.yaml:3: chart appVersion v0.1.0, want v1.2.3",
				"config/default/kustomization.yaml:3: kustomize newTag v0.1.0, want v1.2.3",
				"docs/how-to/install.md:2: remote ref v0.1.0, want v1.2.3",
				"docs/how-to/release.md:1: make VERSION v1.2.3-rc.1, want v1.2.3",
				"docs/how-to/release.md:2: chart archive 0.1.0, want 1.2.3",
				"docs/how-to/release.md:2: image archive v0.1.0, want v1.2.3",
				"docs/how-to/release.md:3: version v0.1.0, want v1.2.3",
				"examples/in-place-restart/jobset.yaml:2: image tag v0.1.0, want v1.2.3",
				"test/images/images.go:2: test images' tag v0.1.0, want v1.2.3",
			},
			wantFound: 10,
		},
		"other projects' versions, and history": {
			files: map[string]string{
				"docs/how-to/install.md":                 "on v1.36.4, with kubectl v1.36.4; `golang.org/x/time` v0.9.0; image: bash:5.2\n",
				"docs/development/README.md":             "its published `v0.36.4`\n",
				"config/policyreport/kustomization.yaml": "# github.com/kyverno/kyverno@v1.19.1\n",
				"CHANGELOG.md":                           "## v0.1.0\n\n- a chart (`inplace-0.1.0.tgz`), `make release VERSION=v0.1.0`, ghcr.io/inplace-dev/inplace-agent:v0.1.0\n",
				"Dockerfile":                             "ARG TARGETOS=linux VERSION=v0.0.0-dev\n",
				"cmd/internal/version/doc.go":            "// -X .../version.version=v0.1.0\n",
				"hack/kube/go.mod":                       "\tgithub.com/containerd/log v0.1.0 // indirect\n",
				"docs/how-to/upgrade.md":                 "Kubernetes 1.35.0 or later; from `v0.1.0`, as inplace v0.1.0 did\n",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			files := map[string][]byte{}
			for path, s := range tc.files {
				files[path] = []byte(s)
			}
			pins := findPins(files, "v1.2.3")
			if len(pins) != tc.wantFound {
				t.Errorf("found %d pins, want %d: %v", len(pins), tc.wantFound, pins)
			}
			var got []string
			for _, p := range pins {
				if p.got != p.want {
					got = append(got, p.String())
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pins that disagree (-want +got):\n%s", diff)
			}
		})
	}
}
