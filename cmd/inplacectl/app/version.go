package app

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/inplace-dev/inplace/cmd/internal/version"
)

func newVersionCommand(root *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and commit of this build",
		Args:  noArgs(""),
		Run: func(cmd *cobra.Command, _ []string) {
			// The binary's name: inplacectl, or kubectl-inplace.
			fmt.Fprintln(root.streams.Out, cmd.Root().Name(), version.Get())
		},
	}
}
