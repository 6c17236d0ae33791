package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/images"
)

func main() {
	sockets := flag.String("sockets", ".local/containerd-sockets", "the running local cluster's containerd addresses, one a line; none: build only")
	flag.Parse()
	if err := run(*sockets); err != nil {
		fmt.Fprintln(os.Stderr, "image-pytorch:", err)
		os.Exit(1)
	}
}

func run(socketsFile string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	root, err := cluster.RepoRoot()
	if err != nil {
		return err
	}
	bin, err := cluster.BinDir()
	if err != nil {
		return err
	}
	cache := filepath.Join(bin, "images")
	start := time.Now()
	img, err := images.BuildPyTorch(ctx, root, cache, filepath.Join(cache, "inplace-pytorch.tar"), os.Stdout)
	if err != nil {
		return err
	}
	how := "built"
	if img.Cached {
		how = "built (Debian's packages from the cache)"
	}
	fmt.Printf("%s %s in %v: %d MB compressed, archive %s\n", images.PyTorch, how, time.Since(start).Round(time.Second), img.Size>>20, img.Archive)

	if socketsFile == "none" {
		return nil
	}
	data, err := os.ReadFile(socketsFile)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Printf("no local cluster with real nodes is running (%s is missing): not imported; 'make cluster-up REAL_NODES=2' starts one\n", socketsFile)
		return nil
	}
	if err != nil {
		return err
	}
	for _, socket := range strings.Fields(string(data)) {
		start := time.Now()
		if err := cluster.ImportImage(ctx, socket, img.Archive); err != nil {
			return err
		}
		fmt.Printf("imported into the node of %s in %v\n", socket, time.Since(start).Round(time.Second))
	}
	return nil
}
