package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/inplace-dev/inplace/test/images"
)

func main() {
	dist := flag.String("dist", "dist", "the release's directory, as make release wrote it")
	registry := flag.String("registry", "", "where to push: host[:port][/path], e.g. registry.example.com/ml")
	insecure := flag.Bool("insecure", false, "reach the registry over plain HTTP (a local registry)")
	manifests := flag.String("manifests", "", "if set, write the release's install manifests there, their images moved to the registry")
	flag.Parse()
	if *registry == "" {
		fmt.Fprintln(os.Stderr, "push: --registry is required (make push REGISTRY=host[:port][/path])")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var nameOpts []name.Option
	if *insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	pushed, err := images.PushRelease(ctx, *dist, *registry, nameOpts, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	for _, p := range pushed {
		fmt.Printf("pushed %s@%s\n", p.Ref, p.Digest)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "push: %v\n", err)
		os.Exit(1)
	}
	if *manifests == "" {
		return
	}
	written, err := images.RepointManifests(*dist, *registry, *manifests)
	for _, w := range written {
		fmt.Printf("wrote %s\n", w)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "push: %v\n", err)
		os.Exit(1)
	}
}
