package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"

	"golang.org/x/mod/semver"

	"github.com/inplace-dev/inplace/test/images"
)

// versionPkg is where the linker stamps a binary's version and commit.
const versionPkg = "github.com/inplace-dev/inplace/cmd/internal/version"

// options are the command's flags.
type options struct {
	version   string
	out       string
	platforms string
	// cliPlatforms are the kubectl plugin's, OS/ARCH.
	cliPlatforms string
	commit       string
	kustomize    string
	helm         string
}

func main() {
	var o options
	flag.StringVar(&o.version, "version", "", "the release's version, vX.Y.Z (semantic versioning; a pre-release as vX.Y.Z-rc.1)")
	flag.StringVar(&o.out, "out", "dist", "the directory to write the release into; replaced whole")
	flag.StringVar(&o.platforms, "platforms", "linux/amd64,linux/arm64", "the images' platforms, comma-separated")
	flag.StringVar(&o.cliPlatforms, "cli-platforms", "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64", "the kubectl plugin's platforms, comma-separated")
	flag.StringVar(&o.commit, "commit", "", "the commit stamped into the binaries (default: git rev-parse HEAD)")
	flag.StringVar(&o.kustomize, "kustomize", os.Getenv("KUSTOMIZE"), "the kustomize binary (default: $KUSTOMIZE, as make sets it)")
	flag.StringVar(&o.helm, "helm", os.Getenv("HELM"), "the helm binary (default: $HELM, as make sets it)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	files, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	printTable(os.Stdout, o.out, files)
}

// file is one file of a release.
type file struct {
	name, sha256 string
	size         int64
}

// run writes the release described by o, whole or not at all: it is built
// beside o.out and takes its place once every file is written.
func run(ctx context.Context, o options) ([]file, error) {
	if err := checkVersion(o.version); err != nil {
		return nil, err
	}
	if o.kustomize == "" || o.helm == "" {
		return nil, errors.New("--kustomize and --helm are needed (make release sets both)")
	}
	var goarchs []string
	for p := range strings.SplitSeq(o.platforms, ",") {
		arch, err := images.Goarch(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("--platforms: %w", err)
		}
		goarchs = append(goarchs, arch)
	}
	type platform struct{ goos, goarch string }
	var clis []platform
	for p := range strings.SplitSeq(o.cliPlatforms, ",") {
		goos, goarch, err := cliPlatform(p)
		if err != nil {
			return nil, fmt.Errorf("--cli-platforms: %w", err)
		}
		clis = append(clis, platform{goos, goarch})
	}
	root, err := repoRoot(ctx)
	if err != nil {
		return nil, err
	}
	if o.commit == "" {
		if o.commit, err = output(ctx, root, "git", "rev-parse", "HEAD"); err != nil {
			return nil, err
		}
	}
	// A release is built from a commit as it is: say so when it is not,
	// in the stamp as Kubernetes' gitTreeState does, and here.
	if status, err := output(ctx, root, "git", "status", "--porcelain", "--untracked-files=no"); err != nil {
		return nil, err
	} else if status != "" {
		o.commit += "-dirty"
		fmt.Fprintf(os.Stderr, "release: warning: the work tree has uncommitted changes; the binaries are stamped %s\n", o.commit)
	}
	if tags, _ := output(ctx, root, "git", "tag", "--points-at", "HEAD"); !slices.Contains(strings.Fields(tags), o.version) {
		fmt.Fprintf(os.Stderr, "release: warning: HEAD is not tagged %s (docs/how-to/release.md: tag, then build from the tag)\n", o.version)
	}
	// The archives are pinned to o.version whatever the tree says, but the
	// docs and the remote kustomizations name the tree's version.
	if v, err := treeVersion(root); err != nil {
		return nil, err
	} else if v != o.version {
		fmt.Fprintf(os.Stderr, "release: warning: %s says %s, not %s: the tree's docs and manifests name %[2]s (docs/how-to/release.md: bump it, then tag)\n", versionFile, v, o.version)
	}
	out, err := filepath.Abs(o.out)
	if err != nil {
		return nil, err
	}
	if err := checkOut(out, root); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return nil, err
	}
	staging, err := os.MkdirTemp(filepath.Dir(out), "."+filepath.Base(out)+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(staging)

	for _, m := range []struct{ dir, name string }{
		{"config/default", "install.yaml"},
		{"config/selfsigned", "install-selfsigned.yaml"},
	} {
		built, err := output(ctx, root, o.kustomize, "build", m.dir)
		if err != nil {
			return nil, err
		}
		pinned, err := pinImages(built+"\n", o.version)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.dir, err)
		}
		if err := os.WriteFile(filepath.Join(staging, m.name), []byte(manifestHeader(o.version, m.name)+pinned), 0o644); err != nil {
			return nil, err
		}
	}

	chartVersion := strings.TrimPrefix(o.version, "v")
	if _, err := output(ctx, root, o.helm, "package", "charts/inplace", "--version", chartVersion, "--app-version", o.version, "--destination", staging); err != nil {
		return nil, err
	}
	// The archive is what users install: lint it, not the directory.
	if _, err := output(ctx, root, o.helm, "lint", "--strict", filepath.Join(staging, "inplace-"+chartVersion+".tgz")); err != nil {
		return nil, err
	}

	crd, err := os.ReadFile(filepath.Join(root, jobSetCRD))
	if err != nil {
		return nil, err
	}
	header := fmt.Sprintf("# The JobSet CRD of inplace %s, alone: what replaces upstream JobSet's\n# (docs/how-to/migrate-from-jobset.md).\n#   kubectl apply --server-side --force-conflicts -f jobset-crd.yaml\n", o.version)
	if err := os.WriteFile(filepath.Join(staging, "jobset-crd.yaml"), append([]byte(header), crd...), 0o644); err != nil {
		return nil, err
	}

	built, err := images.BuildRelease(ctx, root, staging, o.version, o.commit, goarchs)
	if err != nil {
		return nil, err
	}
	// By digest, for those who push the images and pin them: the tag
	// can be pushed again, the digest cannot.
	var refs strings.Builder
	for _, img := range built {
		fmt.Fprintf(&refs, "%s@%s\n", img.Ref, img.Digest)
	}
	if err := os.WriteFile(filepath.Join(staging, "images.txt"), []byte(refs.String()), 0o644); err != nil {
		return nil, err
	}

	work, err := os.MkdirTemp("", "inplace-release-cli-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	var archives []cliArchive
	for _, p := range clis {
		path, err := buildCLI(ctx, root, work, staging, o.version, o.commit, p.goos, p.goarch)
		if err != nil {
			return nil, err
		}
		sum, _, err := sha256File(path)
		if err != nil {
			return nil, err
		}
		archives = append(archives, cliArchive{goos: p.goos, goarch: p.goarch, name: filepath.Base(path), sha256: sum})
	}
	krew, err := krewManifest(o.version, archives)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(staging, "inplace.krew.yaml"), krew, 0o644); err != nil {
		return nil, err
	}

	files, err := checksum(staging)
	if err != nil {
		return nil, err
	}
	var sums strings.Builder
	for _, f := range files {
		// sha256sum's format: `sha256sum -c SHA256SUMS` checks it.
		fmt.Fprintf(&sums, "%s  %s\n", f.sha256, f.name)
	}
	if err := os.WriteFile(filepath.Join(staging, "SHA256SUMS"), []byte(sums.String()), 0o644); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(out); err != nil {
		return nil, err
	}
	if err := os.Chmod(staging, 0o755); err != nil {
		return nil, err
	}
	if err := os.Rename(staging, out); err != nil {
		return nil, err
	}
	return files, nil
}

// jobSetCRD is the JobSet CRD in the source, as controller-gen writes it.
const jobSetCRD = "config/crd/bases/jobset.x-k8s.io_jobsets.yaml"

// checkOut refuses an output directory that replacing whole would lose
// something: the repository or a directory holding it, or a directory
// that is not a release this command wrote (every file of one is listed
// in its SHA256SUMS).
func checkOut(out, root string) error {
	if rel, err := filepath.Rel(out, root); err == nil && !strings.HasPrefix(rel, "..") {
		return fmt.Errorf("--out %s: the repository is in it, and it is replaced whole; name a directory of its own, e.g. dist", out)
	}
	entries, err := os.ReadDir(out)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if len(entries) > 0 && err != nil {
		return fmt.Errorf("--out %s: it exists and holds no release (no SHA256SUMS), and it is replaced whole; remove it or name another directory", out)
	}
	listed := map[string]bool{"SHA256SUMS": true}
	for _, line := range strings.Split(string(sums), "\n") {
		if _, name, ok := strings.Cut(line, "  "); ok {
			listed[name] = true
		}
	}
	for _, e := range entries {
		if !listed[e.Name()] {
			return fmt.Errorf("--out %s: %s is not a file of the release there, and the directory is replaced whole; move it, or name another directory", out, e.Name())
		}
	}
	return nil
}

// checkVersion refuses what is not a full semantic version with its v.
func checkVersion(v string) error {
	if v == "" {
		return errors.New("--version is needed: make release VERSION=vX.Y.Z")
	}
	if !semver.IsValid(v) || semver.Canonical(v) != v {
		return fmt.Errorf("--version %q: want a semantic version vMAJOR.MINOR.PATCH, e.g. v0.9.0 or v0.9.0-rc.1 (no build metadata)", v)
	}
	return nil
}

// ourImage is a reference to the manager's or the agent's image, whatever
// its tag, in a rendered manifest; the manager's configuration names the
// agent's in a ConfigMap, where kustomize's images transformer does not
// reach.
var ourImage = regexp.MustCompile(`(` + regexp.QuoteMeta(images.ManagerRepository) + `|` + regexp.QuoteMeta(images.AgentRepository) + `):[\w][\w.-]*`)

// pinImages tags every reference to the manager's and the agent's images
// in manifest with version. A manifest that does not name both, or names
// another image of the project, is refused: a release must install what it
// ships.
func pinImages(manifest, version string) (string, error) {
	count := map[string]int{}
	pinned := ourImage.ReplaceAllStringFunc(manifest, func(ref string) string {
		repo := ref[:strings.LastIndex(ref, ":")]
		count[repo]++
		return repo + ":" + version
	})
	for _, repo := range []string{images.ManagerRepository, images.AgentRepository} {
		if count[repo] == 0 {
			return "", fmt.Errorf("no reference to %s: the release would not install the image it ships", repo)
		}
	}
	for _, line := range strings.Split(pinned, "\n") {
		if strings.Contains(line, "ghcr.io/inplace-dev/") && !ourImage.MatchString(line) {
			return "", fmt.Errorf("an image the release does not ship: %s", strings.TrimSpace(line))
		}
	}
	return pinned, nil
}

// manifestHeader says, atop an install manifest, what it is and how it is
// applied.
func manifestHeader(version, name string) string {
	needs := "cert-manager issues the webhooks' serving certificate"
	if name == "install-selfsigned.yaml" {
		needs = "no cert-manager: the manager signs its own serving certificate (one admission replica)"
	}
	return fmt.Sprintf("# inplace %s (%s).\n#   kubectl apply --server-side -f %s\n# Kubernetes 1.35+; docs/how-to/install.md says what each object is for.\n---\n", version, needs, name)
}

// checksum returns the regular files of dir, by name, with their SHA-256.
func checksum(dir string) ([]file, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []file
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		sum, n, err := sha256File(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		files = append(files, file{name: e.Name(), sha256: sum, size: n})
	}
	slices.SortFunc(files, func(a, b file) int { return strings.Compare(a.name, b.name) })
	return files, nil
}

// sha256File returns the SHA-256 of the file at path, in hex, and its size.
func sha256File(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

func printTable(w io.Writer, out string, files []file) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "FILE\tSIZE\tSHA256\n")
	for _, f := range files {
		fmt.Fprintf(tw, "%s\t%.1f MB\t%s\n", filepath.Join(out, f.name), float64(f.size)/1e6, f.sha256[:16])
	}
	fmt.Fprintf(tw, "%s\t\t\n", filepath.Join(out, "SHA256SUMS"))
	tw.Flush()
}

func repoRoot(ctx context.Context) (string, error) {
	return output(ctx, ".", "git", "rev-parse", "--show-toplevel")
}

// output runs a command in dir and returns its standard output, trimmed;
// its error says what ran and what it printed.
func output(ctx context.Context, dir, name string, args ...string) (string, error) {
	return outputEnv(ctx, dir, nil, name, args...)
}

// outputEnv is output with env added to the command's environment.
func outputEnv(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s%s", filepath.Base(name), strings.Join(args, " "), err, stderr.String(), stdout.String())
	}
	return strings.TrimSpace(stdout.String()), nil
}
