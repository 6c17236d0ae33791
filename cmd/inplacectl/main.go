package main

import (
	"context"
	"os"

	"github.com/inplace-dev/inplace/cmd/inplacectl/app"
)

func main() {
	os.Exit(app.Run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
