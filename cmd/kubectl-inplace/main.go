package main

import (
	"context"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/inplace-dev/inplace/cmd/inplacectl/app"
)

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	os.Exit(app.Execute(context.Background(), app.NewPluginCommand(streams), app.PluginArgs(os.Args[0], os.Args[1:])))
}
