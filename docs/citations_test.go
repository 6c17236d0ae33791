package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A page cites only what its reader can find. These are names of
// documents no reader has: a design brief and its sections, a seed, a
// card. A user story is cited by its KEP ("KEP-467's Story 1"), in the
// same sentence, since a story's number means nothing alone.
var (
	// unknownDocument names a document that is not published.
	unknownDocument = regexp.MustCompile(`(?i)\b(?:the|design) brief\b|\bbrief (?:§|table)|\bthe seed\b|\b(?:the|design) card\b|\|\s*seed(?::|\s+and\b)`)
	// story is a user story cited by its number.
	story = regexp.MustCompile(`\bStory \d+`)
	// sentenceEnd ends a sentence, and a table cell ends one too.
	sentenceEnd = regexp.MustCompile(`[.!?](?:\s|$)|\|`)
)

// citation is a reference a reader cannot follow: where it is in its
// block, and its text.
type citation struct {
	at   int
	text string
}

// uncitable returns, in order, the references of a block of a page that a
// reader cannot follow.
func uncitable(text string) []citation {
	var out []citation
	for _, m := range unknownDocument.FindAllStringIndex(text, -1) {
		out = append(out, citation{m[0], text[m[0]:m[1]]})
	}
	for _, m := range story.FindAllStringIndex(text, -1) {
		start := 0
		for _, e := range sentenceEnd.FindAllStringIndex(text[:m[0]], -1) {
			start = e[1]
		}
		if !strings.Contains(text[start:m[0]], "KEP") {
			out = append(out, citation{m[0], text[m[0]:m[1]]})
		}
	}
	slices.SortFunc(out, func(a, b citation) int { return a.at - b.at })
	return out
}

// TestPagesCiteWhatReadersHave keeps the README, the changelog, the
// chart's README, the examples' READMEs and every page of docs/
// (docs/development/ too) free of references to documents readers do not
// have: a brief, a seed, a card, or a story without its KEP.
func TestPagesCiteWhatReadersHave(t *testing.T) {
	for _, page := range markdownPages(t) {
		data, err := os.ReadFile(filepath.Join("..", page))
		if err != nil {
			t.Fatal(err)
		}
		doc := string(data)
		for _, b := range blocks(doc, headings(doc)) {
			for _, c := range uncitable(b.text) {
				line := b.line + strings.Count(b.text[:c.at], "\n")
				t.Errorf("%s:%d: %q cites a document readers do not have: name the design it means, or the story's KEP in the same sentence (\"KEP-467's Story 1\") and what the story is", page, line, c.text)
			}
		}
	}
}

// TestUncitable holds the rule's reading of a sentence to what the
// documentation means.
func TestUncitable(t *testing.T) {
	for text, want := range map[string]string{
		"(the KEPs and the design brief)":                           "design brief",
		"| brief table: injection in `webhook/` |":                  "brief table",
		"Keep it brief: one idea per sentence.":                     "",
		"KEP-467's rules hold.":                                     "",
		"The seed's rules hold.":                                    "The seed",
		"As brief §4.4 says, and as the brief asks.":                "brief §, the brief",
		"| seed: the agent watches the JobSet | a ConfigMap |":      "| seed:",
		"| seed and upstream: a Job failure | the policy |":         "| seed and",
		"| the card's controller |":                                 "the card",
		"The top level is the design card's.":                       "design card",
		"Set the random seed with `-seed`.":                         "",
		"fail at once on a program bug (KEP-262's Story 1).":        "",
		"node maintenance restarts are free (Story 3).":             "Story 3",
		"the failure policy decides (Story 2 of the KEP).":          "Story 2",
		"KEP-467's Story 1 and Story 2, a deleted Pod":              "",
		"KEP-467's Story 1 restarts. Story 2 fails.":                "Story 2",
		"| mutate, KEP-467 Story 1 | 1 ms |\n| validate, Story 1 |": "Story 1",
		"a worker's exit, for four stories: an agent's exit":        "",
	} {
		var found []string
		for _, c := range uncitable(text) {
			found = append(found, c.text)
		}
		if got := strings.Join(found, ", "); got != want {
			t.Errorf("uncitable(%q) = %q, want %q", text, got, want)
		}
	}
}
