package framework

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"github.com/inplace-dev/inplace/test/cluster"
)

// Run runs a command line at the repository's root as a user of the
// cluster would: with its kubeconfig, the cluster's kubectl first on the
// PATH and a HOME of its own (kubectl's caches), env added. It returns the
// output and the error; the output goes to GinkgoWriter as it comes. At
// limit its whole process group is stopped: a pipeline's commands too.
func (f *Framework) Run(ctx context.Context, limit time.Duration, env []string, name string, args ...string) (string, error) {
	ginkgo.GinkgoHelper()
	root, err := cluster.RepoRoot()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	bin, err := cluster.BinDir()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	cmdCtx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(cmdCtx, name, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+f.Cluster.Kubeconfig, "PATH="+bin+":"+os.Getenv("PATH"), "HOME="+ginkgo.GinkgoT().TempDir())
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	ginkgo.GinkgoWriter.Printf("$ %s %s\n", name, strings.Join(args, " "))
	cmd.Stdout = io.MultiWriter(&out, ginkgo.GinkgoWriter)
	cmd.Stderr = cmd.Stdout
	err = cmd.Run()
	return out.String(), err
}
