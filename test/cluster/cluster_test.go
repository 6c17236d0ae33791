package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

func TestStopLeavesNothingBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	artifacts := t.TempDir()
	c, err := Start(context.Background(), Options{Name: "teardown", ArtifactsDir: artifacts, Registry: true})
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, p := range c.procs {
		pids = append(pids, p.cmd.Process.Pid)
	}
	if len(pids) != 5 {
		t.Fatalf("want 5 components running, got %d", len(pids))
	}
	if err := c.CheckAlive(); err != nil {
		t.Fatal(err)
	}
	expectRegistryServesWhatIsPushed(t, c.Registry)

	if err := c.Stop(true); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still exists after Stop (kill -0: %v)", pid, err)
		}
	}
	if _, err := os.Stat(c.workDir); !os.IsNotExist(err) {
		t.Errorf("working directory %s still exists after Stop: %v", c.workDir, err)
	}
	logs, err := os.ReadDir(c.LogsDir())
	if err != nil {
		t.Fatalf("kept logs: %v", err)
	}
	var names []string
	for _, l := range logs {
		names = append(names, l.Name())
	}
	want := []string{"etcd.log", "kube-apiserver.log", "kube-controller-manager.log", "kube-scheduler.log", "registry.log"}
	if !slices.Equal(names, want) {
		t.Errorf("kept logs = %v, want %v", names, want)
	}
	if filepath.Dir(c.LogsDir()) != artifacts {
		t.Errorf("logs kept in %s, want under %s", c.LogsDir(), artifacts)
	}
	if err := c.Stop(false); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// expectRegistryServesWhatIsPushed pushes an image to the registry at
// addr, over plain HTTP, and reads it back by digest, every layer.
func expectRegistryServesWhatIsPushed(t *testing.T, addr string) {
	t.Helper()
	img, err := random.Image(1024, 2)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(addr + "/test/random:v1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := remote.Write(tag, img, remote.WithContext(ctx)); err != nil {
		t.Fatalf("pushing to the registry: %v", err)
	}
	want, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Image(tag.Context().Digest(want.String()), remote.WithContext(ctx))
	if err != nil {
		t.Fatalf("pulling back by digest: %v", err)
	}
	if err := validate.Image(got); err != nil {
		t.Errorf("the image pulled back: %v", err)
	}
}

func TestStartFailureCleansUp(t *testing.T) {
	artifacts := t.TempDir()
	_, err := Start(context.Background(), Options{BinDir: t.TempDir(), ArtifactsDir: artifacts})
	if err == nil {
		t.Fatal("want an error for a directory without binaries")
	}
	if want := "run 'make cluster-binaries'"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not tell the fix %q", err, want)
	}
	if dirs := ownWorkDirs(t); len(dirs) != 0 {
		t.Errorf("working directories left behind: %v", dirs)
	}
}

func TestSweepRemovesDirectoriesOfDeadProcesses(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(os.TempDir(), fmt.Sprintf("%s%d-test", workDirPrefix, dead.Process.Pid))
	live := filepath.Join(os.TempDir(), fmt.Sprintf("%s%d-test", workDirPrefix, os.Getppid()))
	for _, d := range []string{stale, live} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.RemoveAll(stale); os.RemoveAll(live) })

	_ = sweepStaleWorkDirs(false)

	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("directory of a dead process was kept: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("directory of a live process was removed: %v", err)
	}
}

func ownWorkDirs(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), fmt.Sprintf("%s%d-*", workDirPrefix, os.Getpid())))
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}
