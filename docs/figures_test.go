package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The documentation states only figures that a benchmark of this
// repository produces, each linked to its table. A figure here is a
// measured duration ("0.47 s", "takes 2 s") or a ratio ("19×"); other
// kinds (memory, request counts, percentages) are checked by reading.
// settingWords, right before a figure, make it a setting. "after",
// "within", "for", "past" and "up to" also open measurements ("up after
// 13 ms"): a measurement so worded passes, and is left to the reader.
var settingWords = []string{
	"every", "default", "at most", "at least", "up to", "after", "within",
	"for", "past", "timeout of", "timeout", "deadline", "period", "interval",
	"limit of", "limit", "threshold of", "threshold",
}

var (
	// figure is a duration or a ratio in the text.
	figure = regexp.MustCompile(`\b\d+(?:\.\d+)? ?(?:µs|ms|s|min)\b|\d+(?:\.\d+)?×`)
	// setting is what, right before a figure, says that the code or the
	// cluster sets it, not a measurement: one of settingWords ("every
	// 30 s", "(default 5 min)", "at most 8 s", "a timeout of 10 s"), or a
	// configuration key in a code span ("`controller.fatalExitSettle`
	// (2 s)").
	setting = regexp.MustCompile(`(?i)(?:\b(?:` + strings.Join(settingWords, "|") + `)\s*\(?|` + "`" + `\)?[ ,]*\(?)\s*$`)
	// settingAfter is what, right after a figure, says the same: "a 10 s
	// timeout", "the alert's 2 s threshold", "15 s by default", "1 s
	// (`policies.evaluationTimeout`)".
	settingAfter = regexp.MustCompile(`(?i)^\s*(?:(?:timeout|limit|deadline|period|interval|threshold|by default)\b|\(` + "`" + `)`)
	// benchCommand names what measured a table: a benchmark under perf/,
	// a Go benchmark, or a test that prints its figures.
	benchCommand = regexp.MustCompile(`perf/bench/|perf/restartbench|make bench|go test [^\n` + "`" + `]*-bench\b|go test [^\n` + "`" + `]*\./test/(?:e2e|integration)/`)
	tableRow     = regexp.MustCompile(`^\s*\|`)
	listItem     = regexp.MustCompile(`^\s*(?:[-*+]|\d+\.)\s`)
)

// figurePages are the pages held to the rule: the README and every page
// of docs/ but docs/development/, which is for developers and keeps the
// benchmarks' history. The changelog records what was.
func figurePages(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, page := range markdownPages(t) {
		if page == "README.md" || strings.HasPrefix(page, "docs/") && !strings.HasPrefix(page, "docs/development/") {
			out = append(out, page)
		}
	}
	return out
}

// block is a paragraph, a list item, a table row or a heading of a page,
// outside code blocks, with its first line and the heading it is under.
type block struct {
	line    int
	text    string
	section int // index into the page's headings; -1 above the first
}

// blocks cuts a Markdown document into blocks: a blank line, a heading,
// a table row or a new list item ends one.
func blocks(doc string, hs []heading) []block {
	lines := strings.Split(doc, "\n")
	text := make([]string, len(lines))
	markdownLines(doc, func(n int, line string) { text[n-1] = line })
	var out []block
	section := -1
	var cur *block
	for i, line := range text {
		for section+1 < len(hs) && hs[section+1].line <= i+1 {
			section++
		}
		heading := section >= 0 && hs[section].line == i+1
		if strings.TrimSpace(line) == "" || heading || tableRow.MatchString(line) || listItem.MatchString(line) {
			cur = nil
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		if cur == nil {
			out = append(out, block{line: i + 1, section: section})
			cur = &out[len(out)-1]
			cur.text = line
		} else {
			cur.text += "\n" + line
		}
		if heading || tableRow.MatchString(line) {
			cur = nil
		}
	}
	return out
}

// figurePage is a page read for the rule: its text, its headings, and
// which of its sections hold a benchmark table.
type figurePage struct {
	doc      string
	headings []heading
	bench    []bool // by heading
}

func readFigurePage(t *testing.T, name string) *figurePage {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", name))
	if err != nil {
		t.Fatal(err)
	}
	p := &figurePage{doc: string(data), headings: headings(string(data))}
	lines := strings.Split(p.doc, "\n")
	// own is the text of each section up to the next heading, code
	// blocks included: that is where a benchmark's command is given.
	own := make([]string, len(p.headings))
	for i, h := range p.headings {
		end := len(lines)
		if i+1 < len(p.headings) {
			end = p.headings[i+1].line - 1
		}
		own[i] = strings.Join(lines[h.line:end], "\n")
	}
	// A section holds a benchmark table if it holds a table and it, or a
	// section it is under, names the command that measured it.
	for i := range p.headings {
		hasTable := false
		for _, line := range strings.Split(own[i], "\n") {
			hasTable = hasTable || tableRow.MatchString(line)
		}
		named := false
		for j, level := i, p.headings[i].level+1; j >= 0 && !named; j-- {
			if p.headings[j].level < level {
				named = benchCommand.MatchString(own[j])
				level = p.headings[j].level
			}
		}
		p.bench = append(p.bench, hasTable && named)
	}
	return p
}

// benchAnchor reports whether anchor names a section of p that holds a
// benchmark table.
func (p *figurePage) benchAnchor(anchor string) bool {
	for i, h := range p.headings {
		if h.anchor == anchor {
			return p.bench[i]
		}
	}
	return false
}

// measurements returns the figures of a block that are not settings. Code
// spans are taken out first: a code span is a name or a value the reader
// types (`10s`, `-timeout 30m`), not a figure.
func measurements(text string) []string {
	text = codeSpan.ReplaceAllString(text, "`code`")
	text = strings.Join(strings.Fields(text), " ")
	var out []string
	for _, m := range figure.FindAllStringIndex(text, -1) {
		before, after := text[max(0, m[0]-40):m[0]], text[m[1]:]
		if setting.MatchString(before) || settingAfter.MatchString(after) {
			continue
		}
		out = append(out, text[m[0]:m[1]])
	}
	return out
}

// TestFiguresLinkToTheirBenchmark keeps every measured figure of the
// README and docs/ tied to the benchmark table it comes from: a block
// that states a duration or a ratio links to a section holding a
// benchmark table (a table, and the command that measured it named in the
// section or one it is under), on its own page or another, or is itself
// in such a section, where the table is its source. A figure the code
// sets ("every 30 s", "a 10 s timeout") is not a measurement.
func TestFiguresLinkToTheirBenchmark(t *testing.T) {
	pages := map[string]*figurePage{}
	for _, name := range figurePages(t) {
		pages[name] = readFigurePage(t, name)
	}
	for _, name := range figurePages(t) {
		p := pages[name]
		for _, b := range blocks(p.doc, p.headings) {
			figures := measurements(b.text)
			if len(figures) == 0 || b.section >= 0 && p.bench[b.section] {
				continue
			}
			if linksToBenchmark(b.text, name, pages) {
				continue
			}
			t.Errorf("%s:%d: %s, measured, and no link to the benchmark table it comes from (performance.md#..., agent-reports.md#...): link it, drop the figure, or, for a setting, say so (\"every\", \"default\", \"timeout\"): %q",
				name, b.line, strings.Join(figures, ", "), firstLine(b.text))
		}
	}
}

// linksToBenchmark reports whether a block of page from links to a section
// that holds a benchmark table on a page held to the rule.
func linksToBenchmark(text, from string, pages map[string]*figurePage) bool {
	text = codeSpan.ReplaceAllString(text, "`code`")
	for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
		path, anchor, ok := strings.Cut(m[1], "#")
		if !ok || strings.Contains(path, ":") {
			continue
		}
		file := from
		if path != "" {
			file = filepath.ToSlash(filepath.Join(filepath.Dir(from), path))
		}
		if p, ok := pages[file]; ok && p.benchAnchor(anchor) {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestMeasurements holds the rule's reading of a sentence to what the
// documentation means.
func TestMeasurements(t *testing.T) {
	for text, want := range map[string]string{
		"Restarts take 0.3 s.":                                            "0.3 s",
		"In place is 19× faster, and syncs in 120 ms.":                    "19×, 120 ms",
		"Every worker runs again 5.2 s after one exits.":                  "5.2 s",
		"The manager reads it every 30 s.":                                "",
		"The API server gives each webhook a 10 s timeout.":               "",
		"`controller.inPlaceRestartTimeout` (default 5 min)":              "",
		"The wait is `controller.fatalExitSettle` (2 s).":                 "",
		"An agent that cannot reach the leader for 3 s writes.":           "",
		"at most 8 s, within the webhooks' 10 s timeout":                  "",
		"Set `-timeout 30m` and wait; it took 4 min.":                     "4 min",
		"2 nodes × 2 ranks":                                               "",
		"The restart took 12 s; the lease is renewed every 10 s.":         "12 s",
		"above the alert's 2 s threshold":                                 "",
		"the Lease lapses 15 s by default after its renewal":              "",
		"past the deadline (`leaderElection.renewDeadline`, 10 s)":        "",
		"one policy on one JobSet | 1 s (`policies.evaluationTimeout`) |": "",
	} {
		if got := strings.Join(measurements(text), ", "); got != want {
			t.Errorf("measurements(%q) = %q, want %q", text, got, want)
		}
	}
}
