package docs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// repoURL is how a page that is read outside the repository (the chart's
// README on a chart registry, say) links into it; such a link is checked
// as the relative link it stands for.
var repoURL = regexp.MustCompile(`^https://github\.com/inplace-dev/inplace/(?:blob|tree)/main/(.*)$`)

// markdownPages are the pages whose links TestRelativeLinksResolve checks,
// relative to the repository root: the README, the changelog, every page
// of docs/, the examples' READMEs and the chart's.
func markdownPages(t *testing.T) []string {
	t.Helper()
	pages := []string{"README.md", "CHANGELOG.md", "charts/inplace/README.md"}
	for _, dir := range []string{"docs", "examples"} {
		err := filepath.WalkDir(filepath.Join("..", dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
				return err
			}
			if dir == "examples" && d.Name() != "README.md" {
				return nil
			}
			rel, err := filepath.Rel("..", path)
			pages = append(pages, filepath.ToSlash(rel))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return pages
}

var (
	fence      = regexp.MustCompile("^\\s*(```|~~~)")
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refLink    = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s+.*)?$`)
	atxHeading = regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$`)
	mdLink     = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// markdownLines calls visit with every line of a Markdown document that
// is not inside a fenced code block.
func markdownLines(doc string, visit func(n int, line string)) {
	inFence := ""
	for i, line := range strings.Split(doc, "\n") {
		if m := fence.FindStringSubmatch(line); m != nil {
			switch {
			case inFence == "":
				inFence = m[1]
			case m[1] == inFence:
				inFence = ""
			}
			continue
		}
		if inFence == "" {
			visit(i+1, line)
		}
	}
}

// links returns the link targets of a Markdown document, each with its
// line. A link's text may run over lines of its paragraph; links inside
// code spans and code blocks are text, not links.
func links(doc string) []link {
	lines := strings.Split(doc, "\n")
	text := make([]string, len(lines))
	markdownLines(doc, func(n int, line string) { text[n-1] = line })
	var out []link
	// Paragraph by paragraph: a code span or a link never crosses a blank
	// line.
	for start := 0; start < len(text); {
		end := start
		for end < len(text) && strings.TrimSpace(text[end]) != "" {
			end++
		}
		para := codeSpan.ReplaceAllStringFunc(strings.Join(text[start:end], "\n"), func(s string) string {
			return strings.Map(func(r rune) rune {
				if r == '\n' {
					return r
				}
				return 'x'
			}, s)
		})
		for _, m := range inlineLink.FindAllStringSubmatchIndex(para, -1) {
			out = append(out, link{start + 1 + strings.Count(para[:m[0]], "\n"), para[m[2]:m[3]]})
		}
		for i, line := range strings.Split(para, "\n") {
			if m := refLink.FindStringSubmatch(line); m != nil {
				out = append(out, link{start + 1 + i, m[1]})
			}
		}
		start = end + 1
	}
	return out
}

// link is a link's target and the line it is on.
type link struct {
	line   int
	target string
}

// anchors returns the anchors GitHub gives the headings of a Markdown
// document: the heading's text as rendered (code spans and links reduced
// to their text, emphasis dropped), in lower case, with every character
// but letters, digits, spaces, hyphens and underscores removed and spaces
// turned into hyphens; a repeated anchor gets -1, -2, ...
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	for _, h := range headings(doc) {
		out[h.anchor] = true
	}
	return out
}

// heading is a heading of a Markdown document: its line, its level (the
// number of #) and the anchor GitHub gives it.
type heading struct {
	line, level int
	anchor      string
}

// headings returns the headings of a Markdown document, in order, each
// with the anchor that anchors describes.
func headings(doc string) []heading {
	var out []heading
	seen := map[string]int{}
	markdownLines(doc, func(n int, line string) {
		m := atxHeading.FindStringSubmatch(line)
		if m == nil {
			return
		}
		text := mdLink.ReplaceAllString(m[1], "$1")
		text = strings.NewReplacer("`", "", "**", "", "*", "").Replace(text)
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		slug := b.String()
		anchor := slug
		if k := seen[slug]; k > 0 {
			anchor = fmt.Sprintf("%s-%d", slug, k)
		}
		seen[slug]++
		level := len(strings.TrimSpace(line)) - len(strings.TrimLeft(strings.TrimSpace(line), "#"))
		out = append(out, heading{n, level, anchor})
	})
	return out
}

// TestRelativeLinksResolve keeps the documentation's links alive: every
// relative link of a page (and every link to this repository's main
// branch on GitHub) names a file or directory that exists, and its
// #anchor, if any, a heading of that file.
func TestRelativeLinksResolve(t *testing.T) {
	pages := markdownPages(t)
	if !slices.Contains(pages, "docs/README.md") {
		t.Error("docs/README.md, the documentation's index, is missing")
	}
	headings := map[string]map[string]bool{}
	anchorsOf := func(file string) (map[string]bool, error) {
		if a, ok := headings[file]; ok {
			return a, nil
		}
		data, err := os.ReadFile(filepath.Join("..", file))
		if err != nil {
			return nil, err
		}
		headings[file] = anchors(string(data))
		return headings[file], nil
	}
	for _, page := range pages {
		data, err := os.ReadFile(filepath.Join("..", page))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links(string(data)) {
			target := l.target
			var file string
			if m := repoURL.FindStringSubmatch(target); m != nil {
				file = m[1]
			} else if strings.Contains(target, ":") && !strings.HasPrefix(target, "#") {
				continue // another site, mailto:
			}
			path, anchor, _ := strings.Cut(target, "#")
			switch {
			case file != "":
				file, _, _ = strings.Cut(file, "#")
			case path == "":
				file = page
			case strings.HasPrefix(path, "/"):
				file = strings.TrimPrefix(path, "/")
			default:
				file = filepath.ToSlash(filepath.Join(filepath.Dir(page), path))
			}
			if strings.HasPrefix(file, "../") {
				t.Errorf("%s:%d: %s points outside the repository", page, l.line, target)
				continue
			}
			info, err := os.Stat(filepath.Join("..", file))
			if err != nil {
				t.Errorf("%s:%d: %s: no such file or directory %s", page, l.line, target, file)
				continue
			}
			if anchor == "" {
				continue
			}
			if info.IsDir() || !strings.HasSuffix(file, ".md") {
				t.Errorf("%s:%d: %s: an anchor into %s, which is not a Markdown page", page, l.line, target, file)
				continue
			}
			a, err := anchorsOf(file)
			if err != nil {
				t.Fatal(err)
			}
			if !a[anchor] {
				t.Errorf("%s:%d: %s: %s has no heading #%s", page, l.line, target, file, anchor)
			}
		}
	}
}

// TestAnchors holds the anchors to GitHub's rules on headings of the kinds
// these pages have.
func TestAnchors(t *testing.T) {
	doc := strings.Join([]string{
		"# Reference",
		"## Real nodes: `test/cluster` with `RealNodes`",
		"### inplacectl and kubectl inplace",
		"## Shared volume claims (`spec.volumeClaimPolicies`)",
		"### 3. Replace the CRD with inplace's",
		"## Restart scope: container or process",
		"## See [the install](install.md) first",
		"```sh",
		"# not a heading",
		"```",
		"## Reference",
	}, "\n")
	want := []string{
		"reference", "real-nodes-testcluster-with-realnodes", "inplacectl-and-kubectl-inplace",
		"shared-volume-claims-specvolumeclaimpolicies", "3-replace-the-crd-with-inplaces",
		"restart-scope-container-or-process", "see-the-install-first", "reference-1",
	}
	got := anchors(doc)
	for _, w := range want {
		if !got[w] {
			t.Errorf("no anchor %q; got %v", w, got)
		}
	}
	if got["not-a-heading"] || len(got) != len(want) {
		t.Errorf("anchors %v, want exactly %v", got, want)
	}
}

// TestIndexListsEveryPage keeps docs/README.md the index of every page
// under docs/.
func TestIndexListsEveryPage(t *testing.T) {
	index, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, l := range links(string(index)) {
		path, _, _ := strings.Cut(l.target, "#")
		listed[filepath.ToSlash(filepath.Clean(path))] = true
	}
	for _, page := range markdownPages(t) {
		rel, ok := strings.CutPrefix(page, "docs/")
		if !ok || rel == "README.md" {
			continue
		}
		if !listed[rel] {
			t.Errorf("docs/README.md does not list docs/%s: add it under its section", rel)
		}
	}
}
