package policies

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
)

// The sizes of json.marshal, json.marshal_with_options and yaml.marshal.
// Their output is linear in the value they write, but a value can share
// its parts: a := array.concat([b], [b]) holds b twice at the cost of one
// pointer, and 25 such steps make a value of 2^25 leaves that takes no
// memory to build, while writing it takes gigabytes. OPA converts the
// whole value to Go values first (ast.JSON), then encodes it. So the size
// is counted over the value as written, each shared part once per path
// to it, and the count stops at the limit: it never visits more than
// maxResultBytes parts, since each adds at least a byte.

// jsonMarshalSize: json.marshal(x), encoding/json's output.
func jsonMarshalSize(operands []*ast.Term) size {
	x := arg(operands, 0)
	if x == nil {
		return size{}
	}
	w := jsonWriter{c: newCounter(maxResultBytes)}
	w.value(x, 0)
	return size{bytes: w.c.total(), exact: !w.inexact}
}

// jsonMarshalWithOptionsSize: json.marshal_with_options(x, opts),
// indented as json.MarshalIndent indents, with the prefix once more at
// the start. Options OPA refuses count as none: it refuses them after it
// has converted x.
func jsonMarshalWithOptionsSize(operands []*ast.Term) size {
	x := arg(operands, 0)
	if x == nil {
		return size{}
	}
	w := jsonWriter{c: newCounter(maxResultBytes)}
	if opts, ok := arg(operands, 1).(ast.Object); ok {
		w.pretty, w.prefix, w.indent = jsonIndentOptions(opts)
	}
	if w.pretty {
		w.c.add(w.prefix)
	}
	w.value(x, 0)
	return size{bytes: w.c.total(), exact: !w.inexact}
}

// jsonIndentOptions reads OPA's options of json.marshal_with_options:
// pretty if a prefix or an indent is given, unless pretty says otherwise;
// a tab by default.
func jsonIndentOptions(opts ast.Object) (pretty bool, prefix, indent int) {
	indent = 1
	implicit, explicit, declared := false, false, false
	valid := true
	opts.Foreach(func(k, v *ast.Term) {
		key, _ := k.Value.(ast.String)
		switch key {
		case "prefix", "indent":
			s, ok := v.Value.(ast.String)
			if !ok {
				valid = false
				return
			}
			if key == "prefix" {
				prefix = len(s)
			} else {
				indent = len(s)
			}
			implicit = true
		case "pretty":
			b, ok := v.Value.(ast.Boolean)
			if !ok {
				valid = false
				return
			}
			declared, explicit = true, bool(b)
		default:
			valid = false
		}
	})
	pretty = implicit
	if declared {
		pretty = explicit
	}
	return pretty && valid, prefix, indent
}

// jsonWriter counts what encoding/json writes for a value converted by
// ast.JSON: sets as arrays, a key that is not a string as its JSON text.
type jsonWriter struct {
	c *counter
	// pretty: indented with indent bytes a level, each line after
	// prefix bytes.
	pretty         bool
	prefix, indent int
	// inexact: a key was not a string, and is counted at most.
	inexact bool
}

func (w *jsonWriter) value(v ast.Value, depth int) {
	switch v := v.(type) {
	case ast.String:
		w.c.add(jsonQuotedLen(string(v)))
	case ast.Number:
		w.c.add(max(len(v), 1))
	case ast.Boolean:
		w.c.add(len(v.String()))
	case ast.Null:
		w.c.add(4)
	case *ast.Array:
		if w.container(v.Len(), 0, depth) {
			v.Until(func(t *ast.Term) bool { w.value(t.Value, depth+1); return w.c.over() })
		}
	case ast.Set:
		if w.container(v.Len(), 0, depth) {
			v.Until(func(t *ast.Term) bool { w.value(t.Value, depth+1); return w.c.over() })
		}
	case ast.Object:
		if w.container(v.Len(), v.Len(), depth) {
			v.Until(func(k, t *ast.Term) bool {
				w.key(k.Value)
				w.value(t.Value, depth+1)
				return w.c.over()
			})
		}
	default:
		// Not a value a ground operand holds.
		w.c.add(len(v.String()))
	}
}

// container counts an array's or object's brackets, commas and colons
// (keys of them), and when pretty, its newlines and indents and the space
// after each colon. It reports whether counting goes on.
func (w *jsonWriter) container(n, keys, depth int) bool {
	if n == 0 {
		return w.c.add(2)
	}
	if !w.c.add(2 + n - 1 + keys) {
		return false
	}
	if !w.pretty {
		return true
	}
	line := func(depth int) int { return satAdd(1+w.prefix, satMul(w.indent, depth)) }
	return w.c.add(satAdd(satMul(n, line(depth+1)), line(depth))) && w.c.add(keys)
}

// key counts an object's key: a string as a string, anything else as its
// JSON text (encoded by json.Encoder, HTML escaped) written as a string:
// at most twice its length, and two quotes.
func (w *jsonWriter) key(k ast.Value) {
	if s, ok := k.(ast.String); ok {
		w.c.add(jsonQuotedLen(string(s)))
		return
	}
	w.inexact = true
	text := jsonWriter{c: newCounter(w.c.limit)}
	text.value(k, 0)
	w.c.add(satAdd(satMul(2, text.c.total()), 2))
}

// jsonQuotedLen is the length of s as encoding/json writes a string: in
// quotes, with <, > and & escaped (json.Marshal escapes HTML), an invalid
// byte as \ufffd.
func jsonQuotedLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			i++
			switch {
			case b == '"' || b == '\\' || b == '\b' || b == '\f' || b == '\n' || b == '\r' || b == '\t':
				n += 2
			case b < ' ' || b == '<' || b == '>' || b == '&':
				n += 6
			default:
				n++
			}
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		i += w
		switch {
		case r == utf8.RuneError && w == 1, r == '\u2028', r == '\u2029':
			n += 6
		default:
			n += w
		}
	}
	return n
}

// yamlMarshalSize: yaml.marshal(x). OPA writes x as JSON, reads that as
// YAML into Go values and writes those as YAML, two spaces an indent and
// no line folded: the JSON counts, and the YAML at most as yamlWriter
// counts it.
func yamlMarshalSize(operands []*ast.Term) size {
	x := arg(operands, 0)
	if x == nil {
		return size{}
	}
	js := jsonWriter{c: newCounter(maxResultBytes)}
	js.value(x, 0)
	if js.c.over() {
		return size{bytes: js.c.total()}
	}
	y := newCounter(maxResultBytes)
	y.add(8) // the document's end
	yamlLen(x, y, 0)
	return size{bytes: max(js.c.total(), y.total())}
}

// yamlLen counts at most what a block-style YAML writer writes for v at
// depth: every item on a line of its own, indented by two spaces a level
// (yamlIndent), and each scalar in the longest of its styles
// (yamlScalarLen).
func yamlLen(v ast.Value, c *counter, depth int) {
	indent := yamlIndent(depth)
	item := func(k *ast.Term, v ast.Value) bool {
		// The indent, "- " or ": ", a newline.
		if !c.add(indent + 3) {
			return false
		}
		if k != nil {
			if s, ok := k.Value.(ast.String); ok {
				c.add(yamlKeyLen(string(s), indent))
			} else {
				// Its JSON text as a string, ten bytes a byte at most.
				text := jsonWriter{c: newCounter(c.limit)}
				text.value(k.Value, 0)
				c.add(satAdd(satMul(10, satAdd(satMul(2, text.c.total()), 2)), indent+8))
			}
		}
		yamlLen(v, c, depth+1)
		return !c.over()
	}
	switch v := v.(type) {
	case ast.String:
		c.add(yamlScalarLen(string(v), indent))
	case ast.Number:
		c.add(yamlNumberLen(string(v)))
	case ast.Boolean, ast.Null:
		c.add(5)
	case *ast.Array:
		if v.Len() == 0 {
			c.add(3)
			return
		}
		v.Until(func(t *ast.Term) bool { return !item(nil, t.Value) })
	case ast.Set:
		if v.Len() == 0 {
			c.add(3)
			return
		}
		v.Until(func(t *ast.Term) bool { return !item(nil, t.Value) })
	case ast.Object:
		if v.Len() == 0 {
			c.add(3)
			return
		}
		v.Until(func(k, t *ast.Term) bool { return !item(k, t.Value) })
	default:
		c.add(len(v.String()))
	}
}

// yamlNumberLen bounds a number's length in YAML: the JSON's digits read
// as an int and written back, or else a float64 written in at most 24
// bytes, or if neither holds it, its digits as a quoted string.
func yamlNumberLen(n string) int {
	if strings.Trim(n, "-0123456789") == "" {
		return len(n) + 2
	}
	return max(len(n)+2, 24)
}

// yamlIndent bounds the indent of a line at depth, and of each line of a
// string written there in literal style (|-).
func yamlIndent(depth int) int { return satAdd(satMul(2, depth), 2) }

// yamlKeyLen bounds a key's length: a scalar, and for one long or of
// several lines, the "? " and the line break YAML writes it with.
func yamlKeyLen(s string, indent int) int {
	n := yamlScalarLen(s, indent)
	if len(s) > 1000 || strings.ContainsAny(s, "\n\r\u0085\u2028\u2029") {
		n = satAdd(n, indent+8)
	}
	return n
}

// yamlScalarLen bounds a string's length as YAML writes it at indent:
// plain, quoted ('it”s', "\x1b") or literal (|-, each line break
// followed by the indent). Each character counts as the longest of its
// forms: two for a quote or a backslash, four for a control character
// (\x1b), ten for one not printable or outside the Basic Multilingual
// Plane (\U0001F600: the writer takes those for unprintable), the indent
// for a line break; an invalid byte was \ufffd in the JSON, and is U+FFFD
// here. The writer escapes every character of a string that starts with
// a byte order mark: four bytes a byte at most.
func yamlScalarLen(s string, indent int) int {
	n := 2 // quotes
	if strings.ContainsAny(s, "\n\r\u0085\u2028\u2029") {
		n += 4 // a block's header: |2- and a line break
	}
	if strings.HasPrefix(s, "\ufeff") {
		return satAdd(n, satMul(4, len(s)))
	}
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		i += w
		switch {
		case r == '\n' || r == '\r':
			n = satAdd(n, indent+1)
		case r == '\'' || r == '"' || r == '\\' || r == '\t':
			n += 2
		case r < ' ' || r == 0x7f:
			n += 4
		case r == utf8.RuneError && w == 1:
			n += 3
		case r == '\u0085' || r == '\u2028' || r == '\u2029':
			n = satAdd(n, indent+w+2)
		case w < 4 && strconv.IsPrint(r):
			n += w
		default:
			n += 10
		}
	}
	return n
}
