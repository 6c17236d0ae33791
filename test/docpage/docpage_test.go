package docpage

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRead(t *testing.T) {
	for name, tc := range map[string]struct {
		page string
		want Page
	}{
		"a block, its heading and the prose before it": {
			page: "# Title\n\nIntro.\n\n## 1. Start\n\nRun:\n\n```sh\nmake up\necho ok\n```\n\nIt prints:\n\n```\nok\n```\n",
			want: Page{
				Headings: []Heading{{Level: 1, Text: "Title", Line: 1}, {Level: 2, Text: "1. Start", Line: 5}},
				Blocks: []Block{
					{Info: "sh", Text: "make up\necho ok\n", Line: 9, Heading: Heading{Level: 2, Text: "1. Start", Line: 5}, Prose: "# Title\n\nIntro.\n\n## 1. Start\n\nRun:\n\n"},
					{Info: "", Text: "ok\n", Line: 16, Heading: Heading{Level: 2, Text: "1. Start", Line: 5}, Prose: "\nIt prints:\n\n"},
				},
			},
		},
		"blocks in list items lose the item's indentation, up to the fence's": {
			page: "1. Write it:\n\n   ```yaml\n   a:\n     b: 1\n\n  c\n   ```\n\n   - Then:\n\n     ```sh\n     run\n       ```\n",
			want: Page{Blocks: []Block{
				{Info: "yaml", Text: "a:\n  b: 1\n\nc\n", Line: 3, Prose: "1. Write it:\n\n"},
				{Info: "sh", Text: "run\n", Line: 12, Prose: "\n   - Then:\n\n"},
			}},
		},
		"a heading or a fence with an info string in a block is its text": {
			page: "## Setup\n\n```text\n# Decisions:\n## not a section\n```sh\n```\n\nAfter.\n\n```sh\nx\n```\n",
			want: Page{
				Headings: []Heading{{Level: 2, Text: "Setup", Line: 1}},
				Blocks: []Block{
					{Info: "text", Text: "# Decisions:\n## not a section\n```sh\n", Line: 3, Heading: Heading{Level: 2, Text: "Setup", Line: 1}, Prose: "## Setup\n\n"},
					{Info: "sh", Text: "x\n", Line: 11, Heading: Heading{Level: 2, Text: "Setup", Line: 1}, Prose: "\nAfter.\n\n"},
				},
			},
		},
		"a longer fence holds shorter ones and closes on one as long or longer": {
			page: "````markdown\n```sh\nls\n```\n````\n\n````\n```\n`````  \n",
			want: Page{Blocks: []Block{
				{Info: "markdown", Text: "```sh\nls\n```\n", Line: 1},
				{Info: "", Text: "```\n", Line: 7, Prose: "\n"},
			}},
		},
		"an empty block, and a closing fence indented otherwise than its opening one": {
			page: "  ```sh\n```\n- item\n\n```console\n      ```\n",
			want: Page{Blocks: []Block{
				{Info: "sh", Text: "", Line: 1},
				{Info: "console", Text: "", Line: 5, Prose: "- item\n\n"},
			}},
		},
		"headings: 1 to 6 #s and a blank or the line's end; inline code is not a fence": {
			page: "#\n#hashtag\n####### seven\n###### Six ##\n##\tTabbed  \n``` `code` ```\n",
			want: Page{Headings: []Heading{
				{Level: 1, Text: "", Line: 1},
				{Level: 6, Text: "Six ##", Line: 4},
				{Level: 2, Text: "Tabbed", Line: 5},
			}},
		},
		"the nearest heading of any level": {
			page: "## Alerts\n\n### Restart alerts\n\n```sh\na\n```\n",
			want: Page{
				Headings: []Heading{{Level: 2, Text: "Alerts", Line: 1}, {Level: 3, Text: "Restart alerts", Line: 3}},
				Blocks:   []Block{{Info: "sh", Text: "a\n", Line: 5, Heading: Heading{Level: 3, Text: "Restart alerts", Line: 3}, Prose: "## Alerts\n\n### Restart alerts\n\n"}},
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Read(tc.page)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Read (-want +got):\n%s", diff)
			}
		})
	}
}

// A page that ends inside a block is an error; what comes before the
// block is read.
func TestReadNotClosed(t *testing.T) {
	for name, tc := range map[string]struct {
		page, err string
		want      Page
	}{
		"no closing fence": {
			page: "## One\n\n```sh\nls\n```\n\n## Two\n\n```sh\nls\n\n## Three\n",
			err:  "line 9: a code block that does not end",
			want: Page{
				Headings: []Heading{{Level: 2, Text: "One", Line: 1}, {Level: 2, Text: "Two", Line: 7}},
				Blocks:   []Block{{Info: "sh", Text: "ls\n", Line: 3, Heading: Heading{Level: 2, Text: "One", Line: 1}, Prose: "## One\n\n"}},
			},
		},
		"a shorter fence does not close a longer one": {
			page: "````\n```\n",
			err:  "line 1: a code block that does not end",
		},
		"nor does a fence with an info string": {
			page: "text\n```sh\nls\n```text\n",
			err:  "line 2: a code block that does not end",
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Read(tc.page)
			if err == nil || err.Error() != tc.err {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Read (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSection(t *testing.T) {
	page := strings.Join([]string{
		"text",               // 1
		"# Runbook",          // 2
		"## Alerts",          // 3
		"### Restart alerts", // 4
		"#### RestartLoop",   // 5
		"text",               // 6
		"## The webhook",     // 7
		"text",               // 8
		"# Appendix",         // 9
		"text",               // 10
		"### Orphan",         // 11
		"text",               // 12
	}, "\n")
	p, err := Read(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		line, level int
		want        string
	}{
		{1, 1, ""},
		{1, 2, ""},
		{2, 1, ""}, // a heading's own line is not under it
		{3, 1, "Runbook"},
		{3, 2, ""},
		{6, 1, "Runbook"},
		{6, 2, "Alerts"},
		{6, 3, "Restart alerts"},
		{6, 4, "RestartLoop"},
		{8, 2, "The webhook"},
		{8, 3, ""}, // "## The webhook" ends "### Restart alerts"
		{10, 1, "Appendix"},
		{10, 2, ""}, // "# Appendix" ends "## The webhook"
		{12, 2, ""},
		{12, 3, "Orphan"},
	} {
		if got := p.Section(tc.line, tc.level).Text; got != tc.want {
			t.Errorf("Section(%d, %d) = %q, want %q", tc.line, tc.level, got, tc.want)
		}
	}
}
