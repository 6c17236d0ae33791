package app

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// longFlag is a flag's long name in pflag's usage lines.
var longFlag = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([\w-]+)`)

// cliReference is the CLI's page of the reference.
const cliReference = "docs/reference/cli.md"

// TestReferenceNamesEveryCommandAndFlag keeps the CLI's reference page
// complete: every command, and every flag of every command, the cluster
// flags included.
func TestReferenceNamesEveryCommandAndFlag(t *testing.T) {
	data, err := os.ReadFile("../../../" + cliReference)
	if err != nil {
		t.Fatal(err)
	}
	section := string(data)
	root := NewCommand(genericiooptions.NewTestIOStreamsDiscard())
	root.InitDefaultCompletionCmd()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		switch {
		case c.HasParent() && c.Parent().Name() == "completion":
			// One row for every shell: completion bash|zsh|fish|powershell.
			if !strings.Contains(section, "completion bash") || !strings.Contains(section, c.Name()) {
				t.Errorf("%s does not name the command %q", cliReference, c.CommandPath())
			}
		case c.HasParent() && !c.HasSubCommands() && !strings.Contains(section, "`"+c.CommandPath()):
			t.Errorf("%s does not name the command %q", cliReference, c.CommandPath())
		}
		for _, m := range longFlag.FindAllStringSubmatch(c.LocalFlags().FlagUsages(), -1) {
			if m[1] != "help" && !strings.Contains(section, "`--"+m[1]) && !strings.Contains(section, ", --"+m[1]) {
				t.Errorf("%s does not name %s's flag --%s", cliReference, c.CommandPath(), m[1])
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
