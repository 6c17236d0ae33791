package tutorial

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/inplace-dev/inplace/test/cluster"
)

const (
	// commandTimeout bounds a block of the page: its waits say 2m.
	commandTimeout = 3 * time.Minute
	// buildTimeout bounds a block that runs make, which may build: the
	// plugin, or the cluster's own binaries after a change of version.
	buildTimeout = 15 * time.Minute
	// stopTimeout bounds the local cluster's stop: make cluster-down kills
	// it after 2 minutes.
	stopTimeout = 3 * time.Minute
)

// session is a reader's terminal at the root of the repository: the
// blocks run one after the other, each in sh -c, each starting with the
// environment the one before left (what the page exports).
type session struct {
	// dir is the root the blocks run at.
	dir string
	// roots are the paths that read as the checkout in outputs.
	roots []string
	env   []string
	// envFile receives each block's environment when it exits.
	envFile string
	// clusters are the local clusters the blocks started, by process id.
	clusters map[int]bool
	// onPage and inRun are the Pods the outputs name, by the page and by
	// the run.
	onPage, inRun podNames
}

// newSession prepares the root the blocks run at and the environment
// they start with.
//
// The blocks do not run at the repository's root itself, where the page's
// `make cluster-up` would find the local cluster a developer runs (it
// keeps its kubeconfig and process id in .local/, and says "already
// running"), `make cluster-down` would stop it, and `make build` would
// replace the developer's binaries. They run at a view of it: a directory
// whose every entry is a link to the root's, but .local/, its own, and
// bin/, its own, holding links to the cluster's binaries that `make
// cluster-binaries` built (the Makefile's test targets build them first).
// The page's commands, `$PWD/.local/kubeconfig` and `$PWD/bin` included,
// then run as written and touch none of the developer's files.
//
// The environment is the test's, less what `make test` adds to it (its
// flags, its exports) and the kubeconfig of the developer's shell, with a
// HOME of its own, for kubectl's cache; go keeps the caches and settings
// of the user it runs as. It names the test's process as the owner of the
// local cluster the page starts (INPLACE_CLUSTER_OWNER_PID): should the
// test be killed before it stops the cluster, the cluster stops itself.
func newSession() *session {
	GinkgoHelper()
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	dir := GinkgoT().TempDir()
	entries, err := os.ReadDir(root)
	Expect(err).NotTo(HaveOccurred())
	for _, e := range entries {
		if e.Name() == "bin" || e.Name() == ".local" {
			continue
		}
		Expect(os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name()))).To(Succeed())
	}
	bin := filepath.Join(root, "bin")
	stamps, err := os.ReadDir(filepath.Join(bin, ".stamps"))
	Expect(err).NotTo(HaveOccurred(), "the local cluster's binaries are not built: run 'make cluster-binaries'")
	Expect(os.MkdirAll(filepath.Join(dir, "bin", ".stamps"), 0o755)).To(Succeed())
	for _, s := range stamps {
		stamp, err := os.ReadFile(filepath.Join(bin, ".stamps", s.Name()))
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(dir, "bin", ".stamps", s.Name()), stamp, 0o644)).To(Succeed())
		Expect(os.Symlink(filepath.Join(bin, s.Name()), filepath.Join(dir, "bin", s.Name()))).To(Succeed())
	}
	Expect(filepath.Join(dir, "bin", "kube-apiserver")).To(BeAnExistingFile(), "the local cluster's binaries are not built: run 'make cluster-binaries'")

	home := GinkgoT().TempDir()
	out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH", "GOENV").Output()
	Expect(err).NotTo(HaveOccurred())
	goEnv := strings.Split(strings.TrimSpace(string(out)), "\n")
	Expect(goEnv).To(HaveLen(4))
	env := []string{"HOME=" + home, "GOCACHE=" + goEnv[0], "GOMODCACHE=" + goEnv[1], "GOPATH=" + goEnv[2], "GOENV=" + goEnv[3],
		"INPLACE_CLUSTER_OWNER_PID=" + strconv.Itoa(os.Getpid())}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "HOME", "GOCACHE", "GOMODCACHE", "GOPATH", "GOENV", "KUBECONFIG", "INPLACE_CLUSTER_OWNER_PID",
			"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "INPLACE_BIN_DIR", "KUBEBUILDER_ASSETS", "KUSTOMIZE", "HELM", "KREW":
			continue
		}
		env = append(env, kv)
	}
	return &session{
		dir:      dir,
		roots:    []string{dir, root},
		env:      shellEnv(env),
		envFile:  filepath.Join(GinkgoT().TempDir(), "env"),
		clusters: map[int]bool{},
		onPage:   podNames{},
		inRun:    podNames{},
	}
}

// shellEnv is env without what a shell sets for itself at the directory
// it starts in.
func shellEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if name != "PWD" && name != "OLDPWD" && name != "SHLVL" && name != "_" && kv != "" {
			out = append(out, kv)
		}
	}
	return out
}

// run runs a block in sh -c at the session's root, as set -e would in a
// terminal (the first command that fails ends it), and returns what it
// printed, stdout and stderr together. A block that outlives its limit is
// killed, with every process it started.
func (s *session) run(command string, limit time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	script := "set -e\ntrap 'env -0 >" + s.envFile + "' EXIT\n" + command
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Dir = s.dir
	cmd.Env = s.env
	var out bytes.Buffer
	w := io.MultiWriter(&out, GinkgoWriter)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	GinkgoWriter.Printf("$ %s", command)
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w: still running after %v", err, limit)
	}
	if env, readErr := os.ReadFile(s.envFile); readErr == nil {
		s.env = shellEnv(strings.Split(string(env), "\x00"))
	}
	_ = os.Remove(s.envFile)
	if pid, readErr := os.ReadFile(filepath.Join(s.dir, ".local", "cluster.pid")); readErr == nil {
		if n, convErr := strconv.Atoi(strings.TrimSpace(string(pid))); convErr == nil {
			s.clusters[n] = true
		}
	}
	return out.String(), err
}

// expectBlock runs a block of the page and checks that it prints the
// output the page shows after it, what varies between runs set aside
// (normalize), and that the Pods it names kept the names the page says
// they keep.
func (s *session) expectBlock(b block) {
	GinkgoHelper()
	limit := commandTimeout
	if strings.Contains(b.command, "make ") {
		limit = buildTimeout
	}
	start := time.Now()
	out, err := s.run(b.command, limit)
	AddReportEntry(fmt.Sprintf("%s:%d", page, b.line), time.Since(start).Round(100*time.Millisecond).String())
	Expect(err).NotTo(HaveOccurred(), "%s:%d, in step %q:\n%s\nfailed; it printed:\n%s", page, b.line, b.step, b.command, out)

	want, got := normalize(strings.Join(b.output, "\n")), normalize(out, s.roots...)
	Expect(matchLines(want, got)).To(BeTrue(),
		"%s:%d, in step %q:\n%s\nprinted what the page does not show at line %d (%s). Once what varies between runs is set aside, the page shows:\n%s\n\nand the run printed:\n%s",
		page, b.line, b.step, b.command, b.outputLine, firstDifference(want, got), strings.Join(want, "\n"), strings.Join(got, "\n"))

	s.onPage.add(strings.Join(b.output, "\n"))
	s.inRun.add(out)
	Expect(samePods(s.onPage, s.inRun)).To(BeEmpty(), "%s:%d, in step %q: the Pods' names", page, b.line, b.step)
}

// tearDown stops the local cluster as the page's last step does, whether
// the steps got there or not, and checks that every cluster a block
// started is gone, its working directory too.
func (s *session) tearDown() {
	GinkgoHelper()
	out, err := s.run("make cluster-down\n", stopTimeout)
	Expect(err).NotTo(HaveOccurred(), "make cluster-down:\n%s", out)
	for pid := range s.clusters {
		Eventually(func() error { return syscall.Kill(pid, 0) }).WithTimeout(stopTimeout).Should(MatchError(syscall.ESRCH), "the local cluster (pid %d) stopped", pid)
		left, err := filepath.Glob(filepath.Join(os.TempDir(), fmt.Sprintf("inplace-cluster-%d-*", pid)))
		Expect(err).NotTo(HaveOccurred())
		Expect(left).To(BeEmpty(), "the local cluster (pid %d) removed its working directory", pid)
	}
}

var _ = Describe(page, Ordered, func() {
	root, err := cluster.RepoRoot()
	var blocks []block
	if err == nil {
		var doc []byte
		if doc, err = os.ReadFile(filepath.Join(root, page)); err == nil {
			blocks, err = parsePage(string(doc))
		}
	}
	if err != nil {
		It("is read", func() {
			Expect(err).NotTo(HaveOccurred())
		})
		return
	}

	var s *session
	BeforeAll(func() {
		s = newSession()
		DeferCleanup(func() { s.tearDown() })
	})
	for _, b := range blocks {
		It(fmt.Sprintf("step %s, line %d: %s", b.step, b.line, strings.ReplaceAll(strings.TrimSpace(b.command), "\n", "; ")), func() {
			s.expectBlock(b)
		})
	}
})
