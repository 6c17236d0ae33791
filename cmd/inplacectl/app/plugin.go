package app

import (
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// PluginName is the name of the kubectl plugin's binary: kubectl runs
// `kubectl inplace ...` as kubectl-inplace, found on PATH.
const PluginName = "kubectl-inplace"

// CompletionHelperName is the executable kubectl (1.26 and later) runs,
// found on PATH, to complete `kubectl inplace ...`: it passes the words
// after `kubectl inplace`, the last one the word being completed, and reads
// completions in cobra's format. The plugin's binary is that helper too,
// under this name (a link or a copy).
const CompletionHelperName = "kubectl_complete-inplace"

// NewPluginCommand returns the same command as NewCommand, named as the
// kubectl plugin: its usage lines and examples read `kubectl inplace ...`,
// as cobra's display name annotation shows them.
func NewPluginCommand(streams genericiooptions.IOStreams) *cobra.Command {
	return newRootCommand(streams, PluginName, "kubectl inplace")
}

// PluginArgs is the command line of the plugin's binary when run as
// program with args: as CompletionHelperName, kubectl asks for the
// completions of args, which is cobra's __complete request.
func PluginArgs(program string, args []string) []string {
	name := strings.TrimSuffix(filepath.Base(program), ".exe")
	if name != CompletionHelperName {
		return args
	}
	return append([]string{cobra.ShellCompRequestCmd}, args...)
}
