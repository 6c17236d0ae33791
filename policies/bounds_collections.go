package policies

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// The sizes of the builtins that build arrays, sets or objects larger
// than their arguments: the product of two arguments (a match's groups
// by the matches, a document's width by the paths into it), or a copy of
// a value whose parts are shared, once per path to each part (merges of
// objects). array.concat is linear, but doubles an array a call: a few
// dozen calls ask for gigabytes in one.
//
// The ranges (numbers.range, numbers.range_step) and net.cidr_expand are
// as long as their numbers say, but OPA checks cancellation at each
// number: the time limit stops them, as it stops a comprehension.

// arrayConcatSize: array.concat(a, b), a new array of both unless one is
// empty.
func arrayConcatSize(operands []*ast.Term) size {
	a, ok1 := arg(operands, 0).(*ast.Array)
	b, ok2 := arg(operands, 1).(*ast.Array)
	if !ok1 || !ok2 || a.Len() == 0 || b.Len() == 0 {
		return size{}
	}
	return size{values: a.Len() + b.Len(), exact: true}
}

// objectUnionSize: object.union(a, b) makes a new object of both's keys,
// and again under each key where both hold an object.
func objectUnionSize(operands []*ast.Term) size {
	a, ok1 := arg(operands, 0).(ast.Object)
	b, ok2 := arg(operands, 1).(ast.Object)
	if !ok1 || !ok2 || a.Len() == 0 || b.Len() == 0 {
		return size{}
	}
	c := newCounter(maxResultValues)
	mergedLen(a, b, c)
	return size{values: c.total()}
}

func mergedLen(a, b ast.Object, c *counter) {
	if !c.add(a.Len() + b.Len()) {
		return
	}
	a.Until(func(k, v *ast.Term) bool {
		if va, ok := v.Value.(ast.Object); ok {
			if w := b.Get(k); w != nil {
				if vb, ok := w.Value.(ast.Object); ok {
					mergedLen(va, vb, c)
				}
			}
		}
		return c.over()
	})
}

// objectUnionNSize: object.union_n(objects) copies each object, and
// every object in it, into the result.
func objectUnionNSize(operands []*ast.Term) size {
	objs, ok := arg(operands, 0).(*ast.Array)
	if !ok || objs.Len() < 2 {
		return size{}
	}
	c := newCounter(maxResultValues)
	objs.Until(func(t *ast.Term) bool {
		if o, ok := t.Value.(ast.Object); ok {
			objectsLen(o, c)
		}
		return c.over()
	})
	return size{values: c.total()}
}

// objectsLen counts o's entries and those of every object under it
// through objects alone.
func objectsLen(o ast.Object, c *counter) {
	if !c.add(o.Len()) {
		return
	}
	o.Until(func(_, v *ast.Term) bool {
		if vo, ok := v.Value.(ast.Object); ok {
			objectsLen(vo, c)
		}
		return c.over()
	})
}

// jsonPathsSize: json.remove(doc, paths) and json.filter(doc, paths)
// walk doc along every path, and at each array, set or object on the way
// go through all its items: json.remove copies them, json.filter looks
// each up. A thousand paths through an object of a thousand keys each
// reach, or one path a thousand times, go through a million.
func jsonPathsSize(operands []*ast.Term) size {
	doc, ok := arg(operands, 0).(ast.Object)
	if !ok {
		return size{}
	}
	c := newCounter(maxResultValues)
	c.add(doc.Len())
	path := func(t *ast.Term) bool {
		segments, ok := jsonPath(t.Value)
		if !ok {
			return true
		}
		var node ast.Value = doc
		for _, s := range segments[:max(len(segments)-1, 0)] {
			if node = jsonChild(node, s); node == nil || !c.add(width(node)) {
				break
			}
		}
		return c.over()
	}
	switch paths := arg(operands, 1).(type) {
	case *ast.Array:
		paths.Until(path)
	case ast.Set:
		paths.Until(path)
	}
	return size{values: c.total()}
}

// jsonPath reads a path as OPA's json builtins do: "a/b~1c" (a leading /
// or not, ~1 for / and ~0 for ~), or an array of segments.
func jsonPath(v ast.Value) ([]*ast.Term, bool) {
	switch p := v.(type) {
	case ast.String:
		if p == "" {
			return nil, true
		}
		parts := strings.Split(strings.TrimLeft(string(p), "/"), "/")
		segments := make([]*ast.Term, len(parts))
		for i, s := range parts {
			segments[i] = ast.StringTerm(strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~"))
		}
		return segments, true
	case *ast.Array:
		segments := make([]*ast.Term, p.Len())
		for i := range p.Len() {
			segments[i] = p.Elem(i)
		}
		return segments, true
	}
	return nil, false
}

// jsonChild is what OPA's json builtins find under segment s of v: an
// object's value, a set's member, an array's item at an index written
// as a string ("0", not 0 or "00"); nil if nothing.
func jsonChild(v ast.Value, s *ast.Term) ast.Value {
	switch v := v.(type) {
	case ast.Object:
		if t := v.Get(s); t != nil {
			return t.Value
		}
	case ast.Set:
		if v.Contains(s) {
			return s.Value
		}
	case *ast.Array:
		if str, ok := s.Value.(ast.String); ok {
			if i, err := strconv.Atoi(string(str)); err == nil && 0 <= i && i < v.Len() && strconv.Itoa(i) == string(str) {
				return v.Elem(i).Value
			}
		}
	}
	return nil
}

// width is the number of items of an array, set or object, 0 for any
// other value.
func width(v ast.Value) int {
	switch v := v.(type) {
	case *ast.Array:
		return v.Len()
	case ast.Set:
		return v.Len()
	case ast.Object:
		return v.Len()
	}
	return 0
}

// jsonPatchSize: json.patch(doc, ops) edits a tree of the nodes its
// operations' paths go through, and builds each edited node anew: its
// items, at most the widest array, set or object of doc or of the ops'
// values, for each step of each path. copy, move and test build the
// edited subtree they read, up to every node edited so far. The widest
// is found by visiting doc's and the values' nodes once each, shared or
// not: a document of more than maxResultValues items is refused.
func jsonPatchSize(operands []*ast.Term) size {
	ops, ok := arg(operands, 1).(*ast.Array)
	if !ok {
		return size{}
	}
	w := widest{c: newCounter(maxResultValues), seen: map[ast.Value]struct{}{}}
	w.visit(arg(operands, 0))
	steps, reads := 0, 0
	ops.Foreach(func(t *ast.Term) {
		op, ok := t.Value.(ast.Object)
		if !ok {
			return
		}
		for _, key := range []string{"path", "from"} {
			if p := op.Get(ast.StringTerm(key)); p != nil {
				segments, _ := jsonPath(p.Value)
				steps = satAdd(steps, len(segments)+1)
			}
		}
		if v := op.Get(ast.StringTerm("value")); v != nil {
			w.visit(v.Value)
		}
		if name := op.Get(ast.StringTerm("op")); name != nil {
			switch name.Value {
			case ast.String("copy"), ast.String("move"), ast.String("test"):
				reads++
			}
		}
	})
	if w.c.over() {
		return size{values: w.c.total()}
	}
	return size{values: satMul(satMul(w.width, steps), reads+1)}
}

// widest finds the widest array, set or object of a value, visiting each
// once however many paths lead to it, and counts their items.
type widest struct {
	c     *counter
	seen  map[ast.Value]struct{}
	width int
}

func (w *widest) visit(v ast.Value) {
	if w.c.over() {
		return
	}
	switch v.(type) {
	case *ast.Array, ast.Set, ast.Object:
	default:
		return
	}
	if _, ok := w.seen[v]; ok {
		return
	}
	w.seen[v] = struct{}{}
	n := width(v)
	w.width = max(w.width, n)
	if !w.c.add(max(n, 1)) {
		return
	}
	switch v := v.(type) {
	case *ast.Array:
		v.Foreach(func(t *ast.Term) { w.visit(t.Value) })
	case ast.Set:
		v.Foreach(func(t *ast.Term) { w.visit(t.Value) })
	case ast.Object:
		v.Foreach(func(k, t *ast.Term) { w.visit(k.Value); w.visit(t.Value) })
	}
}

// regexFindAllStringSubmatchSize:
// regex.find_all_string_submatch_n(pattern, s, n) makes, for each match,
// an array of the match and each group: the matches times the groups,
// which a pattern of a thousand groups against a string of a thousand
// positions makes a million. The matches are counted only when there
// could be too many.
func regexFindAllStringSubmatchSize(operands []*ast.Term) size {
	pattern, ok1 := arg(operands, 0).(ast.String)
	s, ok2 := arg(operands, 1).(ast.String)
	n, ok3 := arg(operands, 2).(ast.Number)
	if !ok1 || !ok2 || !ok3 {
		return size{}
	}
	limit, ok := n.Int()
	if !ok {
		return size{}
	}
	matches := len(s) + 1 // at most one a position
	if limit >= 0 {
		matches = min(matches, limit)
	}
	// At most a group a parenthesis.
	if bound := satMul(matches, strings.Count(string(pattern), "(")+2); bound <= maxResultValues {
		return size{values: bound}
	}
	re, err := regexp.Compile(string(pattern))
	if err != nil {
		return size{}
	}
	perMatch := re.NumSubexp() + 2
	matches = 0
	re.ReplaceAllStringFunc(string(s), func(string) string {
		matches++
		return ""
	})
	if limit >= 0 {
		matches = min(matches, limit)
	}
	return size{values: satMul(matches, perMatch), exact: true}
}
