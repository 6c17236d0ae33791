package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// cliArchiveName is the name of the kubectl plugin's archive for one
// platform, as krew and most plugins name theirs.
func cliArchiveName(version, goos, goarch string) string {
	return fmt.Sprintf("kubectl-inplace_%s_%s_%s.tar.gz", version, goos, goarch)
}

// completionHelper is kubectl_complete-inplace: kubectl (1.26+) runs it
// with the words of `kubectl inplace ...` to complete, and the plugin
// answers cobra's __complete request. A script and not a link to the
// binary: krew, and some unpackers, take regular files only.
const completionHelper = "#!/bin/sh\n# kubectl runs this to complete `kubectl inplace ...`.\nexec kubectl-inplace __complete \"$@\"\n"

// buildCLI builds the kubectl plugin for goos/goarch, stamped with version
// and commit, and writes its archive into dir: the binary kubectl-inplace,
// the completion helper kubectl_complete-inplace and the LICENSE, every
// one a regular file.
func buildCLI(ctx context.Context, root, work, dir, version, commit, goos, goarch string) (string, error) {
	bin := filepath.Join(work, "cli-"+goos+"-"+goarch, "kubectl-inplace")
	ldflags := fmt.Sprintf("-s -w -X %[1]s.version=%[2]s -X %[1]s.commit=%[3]s", versionPkg, version, commit)
	cmd := []string{"go", "build", "-trimpath", "-ldflags=" + ldflags, "-o", bin, "./cmd/kubectl-inplace"}
	if _, err := outputEnv(ctx, root, []string{"CGO_ENABLED=0", "GOOS=" + goos, "GOARCH=" + goarch}, cmd[0], cmd[1:]...); err != nil {
		return "", err
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	license, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, cliArchiveName(version, goos, goarch))
	return path, writeCLIArchive(path, binary, license)
}

// writeCLIArchive writes the plugin's archive at path: the binary, the
// completion helper and the license, regular files with a fixed time.
func writeCLIArchive(path string, binary, license []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	mtime := time.Unix(0, 0)
	for _, h := range []struct {
		hdr  tar.Header
		data []byte
	}{
		{tar.Header{Name: "kubectl-inplace", Mode: 0o755, Size: int64(len(binary))}, binary},
		{tar.Header{Name: "kubectl_complete-inplace", Mode: 0o755, Size: int64(len(completionHelper))}, []byte(completionHelper)},
		{tar.Header{Name: "LICENSE", Mode: 0o644, Size: int64(len(license))}, license},
	} {
		h.hdr.ModTime = mtime
		if h.hdr.Typeflag == 0 {
			h.hdr.Typeflag = tar.TypeReg
		}
		if err := tw.WriteHeader(&h.hdr); err != nil {
			return err
		}
		if _, err := tw.Write(h.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return f.Close()
}

// cliPlatform splits "darwin/arm64" into its OS and architecture.
func cliPlatform(platform string) (goos, goarch string, err error) {
	goos, goarch, ok := strings.Cut(strings.TrimSpace(platform), "/")
	if !ok || goos == "" || goarch == "" || strings.Contains(goarch, "/") {
		return "", "", fmt.Errorf("platform %q: want OS/ARCH, e.g. linux/amd64 or darwin/arm64", platform)
	}
	return goos, goarch, nil
}
