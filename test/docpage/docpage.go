package docpage

import (
	"fmt"
	"strings"
)

// Heading is a heading of a page: a line, outside the code blocks, that
// starts with 1 to 6 #s followed by a blank or the line's end.
type Heading struct {
	// Level is the number of #s: 1 for the page's title, 2 for its
	// sections. The zero Heading, of level 0, is no heading.
	Level int
	// Text is what follows the #s, without the blanks around it: "5. Run
	// the JobSet".
	Text string
	// Line is its line on the page, from 1.
	Line int
}

// Block is a fenced code block of a page.
type Block struct {
	// Info is its info string, without the blanks around it: sh, yaml,
	// text, ..., or empty.
	Info string
	// Text is its content, each line ending in a newline, without the
	// indentation of the list item it is in: each line loses up to as
	// many leading spaces as its opening fence has.
	Text string
	// Line is the line of its opening fence, from 1.
	Line int
	// Heading is the nearest heading above it, of any level; the zero
	// Heading if none.
	Heading Heading
	// Prose is the page's text between the previous block's closing
	// fence, or the page's start, and this block's opening fence, each
	// line ending in a newline: the headings, paragraphs and list items
	// in between.
	Prose string
}

// Page is what Read finds on a page, in the page's order.
type Page struct {
	Blocks   []Block
	Headings []Heading
}

// Read reads the headings and the fenced code blocks of a Markdown page.
//
// A block opens on a line of 3 or more backticks, indented by any number
// of spaces (a block in a list item is indented with the item), followed
// by its info string, which has no backtick. It closes on a line of at
// least as many backticks, indented by any number of spaces, followed by
// blanks only. Anything in between is the block's text, the headings and
// the fences that do not close it included.
//
// A page that ends inside a block is an error: Read returns what comes
// before the block, and an error that names the block's line.
func Read(page string) (Page, error) {
	var (
		p     Page
		prose strings.Builder
	)
	lines := strings.Split(page, "\n")
	for i := 0; i < len(lines); i++ {
		indent, fence, info, ok := opening(lines[i])
		if !ok {
			if h, ok := heading(lines[i]); ok {
				h.Line = i + 1
				p.Headings = append(p.Headings, h)
			}
			prose.WriteString(lines[i] + "\n")
			continue
		}
		b := Block{Info: info, Line: i + 1, Prose: prose.String()}
		if len(p.Headings) > 0 {
			b.Heading = p.Headings[len(p.Headings)-1]
		}
		var text strings.Builder
		for i++; ; i++ {
			if i == len(lines) {
				return p, fmt.Errorf("line %d: a code block that does not end", b.Line)
			}
			if closing(lines[i], fence) {
				break
			}
			l := lines[i]
			text.WriteString(l[min(indent, spaces(l)):] + "\n")
		}
		b.Text = text.String()
		p.Blocks = append(p.Blocks, b)
		prose.Reset()
	}
	return p, nil
}

// Section returns the heading of the section of a level that a line of
// the page is in: the nearest heading of that level above the line,
// unless a heading of a lower level (fewer #s) comes between them, which
// ends the section. Section(line, 2) of a line under "## 5. Run the
// JobSet" and "### Watch it" is "## 5. Run the JobSet". It returns the
// zero Heading if the line is in no section of that level.
func (p Page) Section(line, level int) Heading {
	for i := len(p.Headings) - 1; i >= 0; i-- {
		h := p.Headings[i]
		switch {
		case h.Line >= line:
		case h.Level == level:
			return h
		case h.Level < level:
			return Heading{}
		}
	}
	return Heading{}
}

// opening reads a block's opening fence: its indentation, its number of
// backticks and its info string.
func opening(line string) (indent, fence int, info string, ok bool) {
	indent = spaces(line)
	fence = backticks(line[indent:])
	rest := line[indent+fence:]
	if fence < 3 || strings.Contains(rest, "`") {
		return 0, 0, "", false
	}
	return indent, fence, strings.TrimSpace(rest), true
}

// closing reports whether line closes a block opened by a fence of n
// backticks.
func closing(line string, n int) bool {
	rest := strings.TrimLeft(line, " ")
	fence := backticks(rest)
	return fence >= n && strings.Trim(rest[fence:], " \t") == ""
}

// heading reads a heading; Line is left to the caller.
func heading(line string) (Heading, bool) {
	level := len(line) - len(strings.TrimLeft(line, "#"))
	rest := line[level:]
	if level < 1 || level > 6 || rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return Heading{}, false
	}
	return Heading{Level: level, Text: strings.Trim(rest, " \t")}, true
}

// spaces is the number of spaces a line starts with.
func spaces(line string) int { return len(line) - len(strings.TrimLeft(line, " ")) }

// backticks is the number of backticks s starts with.
func backticks(s string) int { return len(s) - len(strings.TrimLeft(s, "`")) }
