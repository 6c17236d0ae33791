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

// TestReferenceNamesEveryCommandAndFlag keeps docs/reference.md's CLI
// section complete: every command, and every flag of every command, the
// cluster flags included.
func TestReferenceNamesEveryCommandAndFlag(t *testing.T) {
	data, err := os.ReadFile("../../../docs/reference.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	start := strings.Index(doc, "### inplacectl and kubectl inplace\n")
	if start < 0 {
		t.Fatal("docs/reference.md has no section ### inplacectl and kubectl inplace")
	}
	section := doc[start:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
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
				t.Errorf("docs/reference.md does not name the command %q", c.CommandPath())
			}
		case c.HasParent() && !c.HasSubCommands() && !strings.Contains(section, "`"+c.CommandPath()):
			t.Errorf("docs/reference.md does not name the command %q", c.CommandPath())
		}
		for _, m := range longFlag.FindAllStringSubmatch(c.LocalFlags().FlagUsages(), -1) {
			if m[1] != "help" && !strings.Contains(section, "`--"+m[1]) && !strings.Contains(section, ", --"+m[1]) {
				t.Errorf("docs/reference.md does not name %s's flag --%s", c.CommandPath(), m[1])
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
