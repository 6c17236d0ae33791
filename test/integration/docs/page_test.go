package docs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/inplace-dev/inplace/test/docpage"
)

// step is one thing a reader does on a page, in the page's order: write a
// file, or run a command.
type step struct {
	// line is the line of the step's block on its page.
	line int
	// file, for a file, is its path; text its content.
	file, text string
	// command, for a command, is the lines to run; output what the page
	// shows it prints, and exit the exit status the page says (0 unless it
	// says another).
	command, output string
	exit            int
}

var (
	// A block is a file's content when the line before it ends with the
	// file's path, in code, and a colon: "Write the policy,
	// `guardrails/max_restarts.rego`:".
	fileLeadIn = regexp.MustCompile("`([^`\\s]+/[^`\\s]+)`:$")
	// The prose between a command and its output says which exit status
	// is not 0: "It prints the denial and exits 1:".
	exitsWith = regexp.MustCompile(`\bexits ([0-9]+)\b`)
)

// steps reads the steps of a page: every sh block is a command, and the
// block right after it, with no info string, is what it prints; every
// block led in by a file's path is that file. Other blocks are left
// alone. A command without its output is an error: the page must show
// it. So is a block that does not end.
func steps(page string) ([]step, error) {
	p, err := docpage.Read(page)
	if err != nil {
		return nil, err
	}
	fs := p.Blocks
	var out []step
	for i := 0; i < len(fs); i++ {
		f := fs[i]
		if f.Info == "sh" {
			if i+1 == len(fs) || fs[i+1].Info != "" {
				return nil, fmt.Errorf("line %d: the command is not followed by the output it prints", f.Line)
			}
			s := step{line: f.Line, command: f.Text, output: fs[i+1].Text}
			if m := exitsWith.FindStringSubmatch(fs[i+1].Prose); m != nil {
				s.exit, _ = strconv.Atoi(m[1])
			}
			out = append(out, s)
			i++
			continue
		}
		prose := strings.TrimRight(f.Prose, " \n")
		if m := fileLeadIn.FindStringSubmatch(prose[strings.LastIndex(prose, "\n")+1:]); m != nil {
			out = append(out, step{line: f.Line, file: m[1], text: f.Text})
		}
	}
	return out, nil
}

// readPage reads a page of docs/ and its steps.
func readPage(page string) (string, []step) {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join(root, "docs", page))
	Expect(err).NotTo(HaveOccurred())
	s, err := steps(string(data))
	Expect(err).NotTo(HaveOccurred(), "docs/%s", page)
	return string(data), s
}

var (
	// tableHeader is the header of `kubectl get`'s table, AGE its last
	// column.
	tableHeader = regexp.MustCompile(`^NAME .* AGE$`)
	// age is a value of the AGE column: how long ago the object was
	// created.
	age = regexp.MustCompile(`^[0-9]+[smhd]([0-9]+[smhd])?$`)
)

// normalize replaces what varies from run to run in a command's output,
// on the page and in a run alike: the values of the AGE column of
// `kubectl get`'s tables. Nothing else the guides show varies.
func normalize(out string) string {
	lines := strings.Split(out, "\n")
	column := -1
	for i, l := range lines {
		switch {
		case tableHeader.MatchString(l):
			column = strings.LastIndex(l, "AGE")
		case column >= 0 && len(l) > column && age.MatchString(l[column:]):
			lines[i] = l[:column] + "<age>"
		default:
			column = -1
		}
	}
	return strings.Join(lines, "\n")
}

// commandTimeout bounds one step's commands; kubectl wait gives up after
// 30 s of its own.
const commandTimeout = time.Minute

// run runs a step's command as a reader does: with sh, in dir, with the
// built inplacectl and bin/kubectl first on the PATH and KUBECONFIG set
// to the cluster's. It returns what the command printed, standard output
// and standard error together as a terminal shows them, and its exit
// status.
func run(dir, kubeconfig, command string) (string, int) {
	GinkgoHelper()
	cmdCtx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(cmdCtx, "sh", "-c", command)
	cmd.Dir = dir
	// kubectl's discovery cache goes under HOME: a fresh one per run.
	cmd.Env = []string{
		"PATH=" + binDir + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + GinkgoT().TempDir(),
		"KUBECONFIG=" + kubeconfig,
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		Expect(cmdCtx.Err()).NotTo(HaveOccurred(), "%s: did not end within %s:\n%s", command, commandTimeout, out.String())
		return out.String(), exit.ExitCode()
	}
	Expect(err).NotTo(HaveOccurred(), "%s", command)
	return out.String(), 0
}
