package tutorial

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/inplace-dev/inplace/test/docpage"
)

// page is the tutorial the suite runs, from the repository's root.
const page = "docs/tutorials/first-in-place-jobset.md"

// block is a ```sh block of a numbered step of the page, and the output
// block (```text or ```console) the page shows after it.
type block struct {
	step       string // the step's heading: "5. Run the JobSet"
	line       int    // the line of the block's opening fence
	command    string // the block, as sh -c runs it
	output     []string
	outputLine int // the line of the output block's opening fence; 0: none
}

// stepNumber is the number of a numbered step's heading: "## 5. Run the
// JobSet" is step 5.
var stepNumber = regexp.MustCompile(`^(\d+)\. \S`)

// isStep reports whether a heading opens a numbered step, and its number.
func isStep(h docpage.Heading) (string, bool) {
	m := stepNumber.FindStringSubmatch(h.Text)
	if h.Level != 2 || m == nil {
		return "", false
	}
	return m[1], true
}

// parsePage returns the command blocks of the page's numbered steps, in
// order, each with the output block that follows it. The steps are
// numbered from 1 without a gap, and every command block is followed by
// its output in the same step: a page that shows a command without what
// it prints, or an output without its command, is an error. A step ends
// at the next heading of level 1 or 2.
func parsePage(doc string) ([]block, error) {
	p, readErr := docpage.Read(doc)
	// A wrong number ends the steps: the blocks below it are not read.
	var numbering error
	end, steps := math.MaxInt, 0
	for _, h := range p.Headings {
		if n, ok := isStep(h); ok {
			steps++
			if n != strconv.Itoa(steps) {
				numbering, end = fmt.Errorf("line %d: step %s, want step %d", h.Line, n, steps), h.Line
				break
			}
		}
	}
	var blocks []block
	for _, f := range p.Blocks {
		if f.Line > end {
			break
		}
		h := p.Section(f.Line, 2)
		if _, ok := isStep(h); !ok {
			continue
		}
		switch f.Info {
		case "sh":
			blocks = append(blocks, block{step: h.Text, line: f.Line, command: f.Text})
		case "text", "console":
			if len(blocks) == 0 || blocks[len(blocks)-1].step != h.Text || blocks[len(blocks)-1].outputLine != 0 {
				return nil, fmt.Errorf("line %d: an output block after no command block of its step", f.Line)
			}
			b := &blocks[len(blocks)-1]
			b.output, b.outputLine = strings.Split(strings.TrimSuffix(f.Text, "\n"), "\n"), f.Line
		}
	}
	switch {
	case numbering != nil:
		return nil, numbering
	case readErr != nil:
		return nil, readErr
	case len(blocks) == 0:
		return nil, fmt.Errorf("no ```sh block under a numbered step (## 1. ...)")
	}
	for _, b := range blocks {
		if b.outputLine == 0 {
			return nil, fmt.Errorf("line %d: a command block without the output block it prints", b.line)
		}
	}
	return blocks, nil
}

// variable is what differs from one run of the page to the next, and
// what it reads as once set aside: a commit, a Pod name's random suffix,
// the Go toolchain and the platform that built the plugin, an address and
// port, a process id, a time of day, a time since the failure, an age (a
// column AGE, "(5s ago)", an Event's age), which of a failure's signs the
// controller saw first. The page shows them as one run
// printed them. In that order: a Pod's suffix can read as an age ("29h7s").
var variable = []struct {
	re *regexp.Regexp
	as string
}{
	{regexp.MustCompile(`\b[0-9a-f]{40}\b`), "<commit>"},
	{regexp.MustCompile(`\bcommit [0-9a-f]{7,40}\b`), "commit <commit>"},
	{podName, "${1}-<suffix>"},
	{regexp.MustCompile(`\bgo1\.\d+(?:\.\d+)?\b`), "go<version>"},
	{regexp.MustCompile(`\b(?:linux|darwin)/(?:amd64|arm64)\b`), "<os>/<arch>"},
	{regexp.MustCompile(`\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b`), "<address>"},
	{regexp.MustCompile(`\(pid \d+\)`), "(pid <pid>)"},
	{regexp.MustCompile(`\b\d{2}:\d{2}:\d{2}(?:\.\d+)?\b`), "<time>"},
	{regexp.MustCompile(`\+\d+\.\d+(?:\.\.\d+\.\d+)?s\b`), "+<offset>"},
	// What the controller saw first of one failure: the worker's exit, or
	// its agent's move to the next epoch, which follows it.
	{regexp.MustCompile(`: (?:container \S+ of Pod (\S+) exited|the agent of Pod (\S+) moved to epoch \d+); epoch`), ": <failure of ${1}${2}>; epoch"},
	{regexp.MustCompile(`\b\d+(?:\.\d+)?(?:ms|s|m|h|d)(?:\d+(?:\.\d+)?(?:ms|s|m|h))*\b`), "<age>"},
}

// podName is the name of a Job's Pod: the Job's name and completion
// index, then a random suffix of 5 of the characters Kubernetes draws
// from.
var podName = regexp.MustCompile(`\b([a-z0-9](?:[-a-z0-9]*[a-z0-9])?-\d+-\d+)-[bcdfghjklmnpqrstvwxz2456789]{5}\b`)

// checkout is how the page shows the path of the repository's root.
const checkout = "~/inplace"

// normalize returns the lines of an output with what varies between runs
// set aside (variable), the roots' paths shown as checkout, and the
// blanks between columns made one: a table's columns are as wide as
// their widest value, an age included. Indentation stays. The rows of a
// timeline after its first are sorted: kubectl inplace status orders
// them by time, and a container's start time is a whole second, so that
// within the failure's second their order differs from run to run.
func normalize(text string, roots ...string) []string {
	for _, root := range roots {
		text = strings.ReplaceAll(text, root, checkout)
	}
	for _, v := range variable {
		text = v.re.ReplaceAllString(text, v.as)
	}
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i, line := range lines {
		rest := strings.TrimLeft(line, " \t")
		lines[i] = line[:len(line)-len(rest)] + strings.Join(strings.Fields(rest), " ")
		if strings.TrimSpace(lines[i]) == "" {
			lines[i] = ""
		}
	}
	for i := 0; i < len(lines); {
		j := i
		for j < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[j]), "<time> ") {
			j++
		}
		if j-i > 2 {
			slices.Sort(lines[i+1 : j])
		}
		i = max(j, i+1)
	}
	return lines
}

// ellipsis, alone on a line of an output block, stands for any lines,
// none included: the page shows part of a long output.
const ellipsis = "..."

// matchLines reports whether got is what want shows, line by line, each
// ellipsis of want standing for any lines of got.
func matchLines(want, got []string) bool {
	// match[i][j]: want[i:] matches got[j:].
	match := make([][]bool, len(want)+1)
	for i := range match {
		match[i] = make([]bool, len(got)+1)
	}
	match[len(want)][len(got)] = true
	for i := len(want) - 1; i >= 0; i-- {
		for j := len(got); j >= 0; j-- {
			if strings.TrimSpace(want[i]) == ellipsis {
				match[i][j] = match[i+1][j] || j < len(got) && match[i][j+1]
			} else {
				match[i][j] = j < len(got) && want[i] == got[j] && match[i+1][j+1]
			}
		}
	}
	return match[0][0]
}

// firstDifference says where got first departs from want, reading each
// ellipsis as the lines up to the next one want shows: a hint for the
// reader of a failure, which matchLines decides.
func firstDifference(want, got []string) string {
	j := 0
	for i := 0; i < len(want); i++ {
		if strings.TrimSpace(want[i]) == ellipsis {
			if i+1 == len(want) {
				return ""
			}
			for j < len(got) && got[j] != want[i+1] {
				j++
			}
			continue
		}
		switch {
		case j == len(got):
			return fmt.Sprintf("the page shows %q, the run printed nothing more", want[i])
		case got[j] != want[i]:
			return fmt.Sprintf("the page shows %q, the run printed %q", want[i], got[j])
		}
		j++
	}
	if j < len(got) {
		return fmt.Sprintf("the page shows nothing more, the run printed %q", got[j])
	}
	return ""
}

// podNames are the full names of the Pods an output names, by their name
// without the random suffix.
type podNames map[string]map[string]bool

func (p podNames) add(text string) {
	for _, m := range podName.FindAllStringSubmatch(text, -1) {
		if p[m[1]] == nil {
			p[m[1]] = map[string]bool{}
		}
		p[m[1]][m[0]] = true
	}
}

// samePods compares the Pods the run named with those the page names: a
// Pod the page shows under one name throughout (not recreated) must have
// kept one name in the run too, and one it shows under two names (a new
// Pod) must have had two. It returns the differences.
func samePods(onPage, inRun podNames) []string {
	var out []string
	for _, job := range slices.Sorted(maps.Keys(onPage)) {
		if len(onPage[job]) != len(inRun[job]) {
			out = append(out, fmt.Sprintf("the page shows %d name(s) for the Pod %s-<suffix>, the run printed %d: %s",
				len(onPage[job]), job, len(inRun[job]), strings.Join(slices.Sorted(maps.Keys(inRun[job])), ", ")))
		}
	}
	return out
}
