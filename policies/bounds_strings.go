package policies

import (
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
)

// The sizes of the builtins that build a string larger than their
// arguments: by a product (replace, regular expressions, concat's
// separator, url-encoding an object's key once per value), by widths
// written in the format (sprintf), or by writing a value whose parts are
// shared once per path to each part (sprintf's %v, template strings).

// replaceSize: replace(s, old, new). new replaces each occurrence of
// old, or is inserted at every position if old is empty.
func replaceSize(operands []*ast.Term) size {
	s, ok1 := arg(operands, 0).(ast.String)
	old, ok2 := arg(operands, 1).(ast.String)
	repl, ok3 := arg(operands, 2).(ast.String)
	if !ok1 || !ok2 || !ok3 {
		return size{}
	}
	return replacerSize(string(s), len(repl), string(old), string(repl))
}

// replaceNSize: strings.replace_n(patterns, s), with OPA's replacer: the
// patterns in the order of their keys.
func replaceNSize(operands []*ast.Term) size {
	patterns, ok1 := arg(operands, 0).(ast.Object)
	s, ok2 := arg(operands, 1).(ast.String)
	if !ok1 || !ok2 {
		return size{}
	}
	keys := make([]string, 0, patterns.Len())
	for _, k := range patterns.Keys() {
		key, ok := k.Value.(ast.String)
		if !ok {
			return size{}
		}
		if _, ok := patterns.Get(k).Value.(ast.String); !ok {
			return size{}
		}
		keys = append(keys, string(key))
	}
	slices.Sort(keys)
	oldnew := make([]string, 0, 2*len(keys))
	longest := 0
	for _, k := range keys {
		repl := string(patterns.Get(ast.StringTerm(k)).Value.(ast.String))
		oldnew = append(oldnew, k, repl)
		longest = max(longest, len(repl))
	}
	return replacerSize(string(s), longest, oldnew...)
}

// replacerSize is the length of s with oldnew's replacements made, where
// no replacement is longer than longest. At most one replacement is
// inserted at each position of s and each of its bytes is replaced by at
// most one: when that bounds the result within the limit, nothing is
// counted; otherwise the replacer runs into a writer that counts, and
// stops it past the limit.
func replacerSize(s string, longest int, oldnew ...string) size {
	if bound := satAdd(len(s), satMul(len(s)+1, longest)); bound <= maxResultBytes {
		return size{bytes: bound}
	}
	w := &countingWriter{c: newCounter(maxResultBytes)}
	_, _ = strings.NewReplacer(oldnew...).WriteString(w, s)
	return size{bytes: w.c.total(), exact: true}
}

// regexReplaceSize: regex.replace(s, pattern, value). Each match becomes
// value expanded: its text, with each $ replaced by at most one group,
// no longer than the match. OPA first finds every match at once, two ints
// per group and match (and 24 bytes per match), which counts too. The
// matches are counted only when there could be too many: at most one a
// position, with at most a group a parenthesis.
func regexReplaceSize(operands []*ast.Term) size {
	s, ok1 := arg(operands, 0).(ast.String)
	pattern, ok2 := arg(operands, 1).(ast.String)
	value, ok3 := arg(operands, 2).(ast.String)
	if !ok1 || !ok2 || !ok3 {
		return size{}
	}
	dollars := strings.Count(string(value), "$")
	sizeOf := func(matches, matched, expanded, groups int) int {
		return satAdd(satAdd(len(s)-matched, expanded), satMul(matches, 24+16*(groups+1)))
	}
	matches := len(s) + 1
	if bound := sizeOf(matches, 0, satMul(matches, satAdd(len(value), satMul(dollars, len(s)))), strings.Count(string(pattern), "(")); bound <= maxResultBytes {
		return size{bytes: bound}
	}
	re, err := regexp.Compile(string(pattern))
	if err != nil {
		return size{}
	}
	matches = 0
	matched, expanded := 0, 0
	// The same matches as OPA's, without keeping their indices: the
	// replacement is empty, so the copy it makes is no longer than s.
	re.ReplaceAllStringFunc(string(s), func(m string) string {
		matches++
		matched += len(m)
		expanded = satAdd(expanded, satAdd(len(value), satMul(dollars, len(m))))
		return ""
	})
	return size{bytes: sizeOf(matches, matched, expanded, re.NumSubexp())}
}

// concatSize: concat(sep, strings): the strings and a separator between
// each two.
func concatSize(operands []*ast.Term) size {
	sep, ok := arg(operands, 0).(ast.String)
	if !ok {
		return size{}
	}
	var n, count int
	add := func(t *ast.Term) {
		if s, ok := t.Value.(ast.String); ok {
			n += len(s)
		}
		count++
	}
	switch strs := arg(operands, 1).(type) {
	case *ast.Array:
		strs.Foreach(add)
	case ast.Set:
		strs.Foreach(add)
	default:
		return size{}
	}
	return size{bytes: satAdd(n, satMul(len(sep), max(count-1, 0))), exact: true}
}

// sprintfSize: sprintf(format, args), as OPA calls Go's fmt.Sprintf: a
// number becomes an int64, a float64 or a *big.Int, a string stays one,
// and any other value becomes its text (Value.String), built before the
// call whether a verb uses it or not.
//
// A directive's width or precision is at most 10,000,009 when written
// (fmt stops reading digits past a million, one digit late) and a million
// when taken from an argument (*). A verb writes an argument at most five
// times its length (% #x writes " 0x61" for "a"), padded to the width. An
// argument is written once, by a verb or at the end as EXTRA, unless a
// directive names its argument ([n]): then any verb may write any one.
func sprintfSize(operands []*ast.Term) size {
	format, ok1 := arg(operands, 0).(ast.String)
	args, ok2 := arg(operands, 1).(*ast.Array)
	if !ok1 || !ok2 {
		return size{}
	}
	built := newCounter(maxResultBytes)
	longest, all := 0, 0
	for i := range args.Len() {
		var n int
		switch v := args.Elem(i).Value.(type) {
		case ast.String:
			n = len(v)
		case ast.Number:
			// A float64 prints up to 309 digits before its point.
			n = len(v) + 340
		default:
			before := built.n
			textLen(v, built)
			if built.over() {
				return size{bytes: built.total()}
			}
			n = built.n - before
		}
		longest = max(longest, n)
		all = satAdd(all, n)
	}
	d := scanDirectives(string(format))
	var written int
	if d.reordered {
		written = satAdd(d.padding, satMul(d.count, satAdd(satMul(d.factor, longest), 64)))
	} else {
		written = satAdd(d.padding, satAdd(satMul(d.factor, all), satMul(args.Len(), 64)))
	}
	return size{bytes: max(satAdd(len(format)+16, written), built.n)}
}

// directives sums what the directives of a format may add to the text
// around them.
type directives struct {
	// count of directives; padding: their widths and precisions, and 48
	// bytes each for fmt's complaints (%!d(MISSING), %!(BADWIDTH)...).
	count, padding int
	// factor: the most any verb multiplies its argument by.
	factor int
	// reordered: a directive names its argument.
	reordered bool
}

// Limits of fmt's widths and precisions (fmt.parsenum, fmt.intFromArg).
const (
	fmtMaxWrittenWidth = 1e6*10 + 9
	fmtMaxArgWidth     = 1e6
)

// scanDirectives reads format as fmt.(*pp).doPrintf does, down to the
// quirks that decide where a directive ends: a malformed [n] skips to
// its ], and a number of more than a million digits ends the format.
func scanDirectives(format string) directives {
	d := directives{factor: 1}
	end := len(format)
	for i := 0; i < end; {
		if format[i] != '%' {
			i++
			continue
		}
		i++
		d.count++
		d.padding = satAdd(d.padding, 48)
		sharp := false
	flags:
		for ; i < end; i++ {
			switch format[i] {
			case '#':
				sharp = true
			case '0', '+', '-', ' ':
			default:
				break flags
			}
		}
		i = d.argIndex(format, i)
		var n int
		n, i = fmtNumber(format, i, end)
		d.padding = satAdd(d.padding, n)
		if i+1 < end && format[i] == '.' {
			i = d.argIndex(format, i+1)
			n, i = fmtNumber(format, i, end)
			d.padding = satAdd(d.padding, n)
		}
		i = d.argIndex(format, i)
		if i >= end {
			break
		}
		verb, w := utf8.DecodeRuneInString(format[i:])
		i += w
		d.factor = max(d.factor, verbFactor(verb, sharp))
	}
	return d
}

// argIndex skips an argument index [n] at i, as fmt.(*pp).argNumber.
func (d *directives) argIndex(format string, i int) int {
	if i >= len(format) || format[i] != '[' {
		return i
	}
	d.reordered = true
	if len(format)-i < 3 {
		return i + 1
	}
	if j := strings.IndexByte(format[i+1:], ']'); j >= 0 {
		return i + 1 + j + 1
	}
	return i + 1
}

// fmtNumber reads a width or precision at i: * (an argument's, at most a
// million) or digits, as fmt.parsenum reads them.
func fmtNumber(format string, i, end int) (n, next int) {
	if i < end && format[i] == '*' {
		return fmtMaxArgWidth, i + 1
	}
	for next = i; next < end && '0' <= format[next] && format[next] <= '9'; next++ {
		if n > 1e6 {
			return 0, end
		}
		n = n*10 + int(format[next]-'0')
	}
	return min(n, fmtMaxWrittenWidth), next
}

// verbFactor is the most a verb multiplies its argument's length by.
func verbFactor(verb rune, sharp bool) int {
	switch {
	case verb == 'x' || verb == 'X':
		return 5 // % #x: " 0x61" for each byte
	case verb == 'q' || verb == 'v' && sharp:
		return 4 // a quoted string: \x00 for each byte
	case verb == 'b':
		return 4 // a big integer's bits: 3.33 for each digit
	case verb == 'o' || verb == 'O':
		return 2
	default:
		return 1
	}
}

// templateStringSize: $"...{x}...": each part's text, a value's as
// Value.String writes it. A set holds the values of an expression; OPA
// writes them all before it refuses more than one.
func templateStringSize(operands []*ast.Term) size {
	parts, ok := arg(operands, 0).(*ast.Array)
	if !ok {
		return size{}
	}
	c := newCounter(maxResultBytes)
	part := func(v ast.Value) bool {
		if s, ok := v.(ast.String); ok {
			return c.add(len(s))
		}
		textLen(v, c)
		return !c.over()
	}
	parts.Until(func(t *ast.Term) bool {
		if set, ok := t.Value.(ast.Set); ok {
			return set.Until(func(t *ast.Term) bool { return !part(t.Value) })
		}
		return !part(t.Value)
	})
	return size{bytes: c.total()}
}

// urlQueryEncodeObjectSize: urlquery.encode_object(obj): key=value for
// each value of each key, joined by &, each escaped; a key of n values is
// written n times. OPA converts the whole object to Go values first, so
// a value it then refuses counts as its JSON.
func urlQueryEncodeObjectSize(operands []*ast.Term) size {
	obj, ok := arg(operands, 0).(ast.Object)
	if !ok {
		return size{}
	}
	c := newCounter(maxResultBytes)
	obj.Until(func(k, v *ast.Term) bool {
		var key int
		if s, ok := k.Value.(ast.String); ok {
			key = queryEscapedLen(string(s))
		} else {
			// A key's JSON, escaped as a string, then for a URL.
			kc := newCounter(maxResultBytes)
			jsonLen(k.Value, kc)
			key = satMul(3, satAdd(satMul(2, kc.total()), 2))
		}
		pair := func(v ast.Value) bool {
			if s, ok := v.(ast.String); ok {
				return c.add(satAdd(key, queryEscapedLen(string(s))+2))
			}
			jsonLen(v, c)
			return !c.over()
		}
		switch v := v.Value.(type) {
		case *ast.Array:
			return v.Until(func(t *ast.Term) bool { return !pair(t.Value) })
		case ast.Set:
			return v.Until(func(t *ast.Term) bool { return !pair(t.Value) })
		default:
			return !pair(v)
		}
	})
	return size{bytes: c.total()}
}

// jsonLen counts v's compact JSON into c (bounds_encodings.go).
func jsonLen(v ast.Value, c *counter) {
	w := jsonWriter{c: c}
	w.value(v, 0)
}

// queryEscapedLen is len(url.QueryEscape(s)).
func queryEscapedLen(s string) int {
	n := 0
	for i := range len(s) {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '_', c == '.', c == '~', c == ' ':
			n++
		default:
			n += 3
		}
	}
	return n
}

// textLen counts the length of v's text, as Value.String writes it
// (strings quoted by strconv.Quote), into c, and stops past c's limit.
func textLen(v ast.Value, c *counter) {
	switch v := v.(type) {
	case ast.String:
		c.add(quotedLen(string(v)))
	case ast.Number:
		c.add(len(v))
	case ast.Boolean:
		c.add(len(v.String()))
	case ast.Null:
		c.add(4)
	case *ast.Array:
		if c.add(2 + 2*max(v.Len()-1, 0)) {
			v.Until(func(t *ast.Term) bool { textLen(t.Value, c); return c.over() })
		}
	case ast.Set:
		if v.Len() == 0 {
			c.add(len("set()"))
		} else if c.add(2 + 2*(v.Len()-1)) {
			v.Until(func(t *ast.Term) bool { textLen(t.Value, c); return c.over() })
		}
	case ast.Object:
		// {k: v, ...}
		if c.add(2 + 4*v.Len() - min(v.Len(), 1)*2) {
			v.Until(func(k, val *ast.Term) bool {
				textLen(k.Value, c)
				textLen(val.Value, c)
				return c.over()
			})
		}
	default:
		// Not a value a ground operand holds.
		c.add(len(v.String()))
	}
}

// quotedLen is len(strconv.Quote(s)).
func quotedLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		i += w
		switch {
		case w == 1 && r == utf8.RuneError:
			n += 4 // \x80
		case r == '"' || r == '\\':
			n += 2
		case strconv.IsPrint(r):
			n += w
		case r == '\a' || r == '\b' || r == '\f' || r == '\n' || r == '\r' || r == '\t' || r == '\v':
			n += 2
		case r < ' ' || r == 0x7f:
			n += 4 // \x1b
		case r < 0x10000:
			n += 6 // \u00ad
		default:
			n += 10 // \U000e0001
		}
	}
	return n
}

// countingWriter counts what is written to it, and fails past c's limit.
type countingWriter struct{ c *counter }

var errCounted = errors.New("past the limit")

func (w *countingWriter) Write(p []byte) (int, error) {
	if !w.c.add(len(p)) {
		return 0, errCounted
	}
	return len(p), nil
}

func (w *countingWriter) WriteString(s string) (int, error) {
	if !w.c.add(len(s)) {
		return 0, errCounted
	}
	return len(s), nil
}
