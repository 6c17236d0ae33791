package util

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
)

// MissingFields lists the paths at which want holds a value that got lacks
// or holds differently; fields only in got (defaults, metadata) are fine.
// Lists of named objects (containers, env) are matched by name, as
// Kubernetes merges them; other lists must match item by item.
// Both are compared as plain JSON values, so that numbers compare equal
// whatever their Go type.
func MissingFields(want, got any) []string {
	return missing(normalize(want), normalize(got), "")
}

func normalize(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("unmarshalable: %v", err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		return fmt.Sprintf("unmarshalable: %v", err)
	}
	return out
}

func missing(want, got any, path string) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want an object, got %v", path, got)}
		}
		var out []string
		for _, k := range sortedKeys(w) {
			gv, ok := g[k]
			if !ok {
				out = append(out, path+"."+k+": missing")
				continue
			}
			out = append(out, missing(w[k], gv, path+"."+k)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if byName, named := indexByName(w); named && ok {
			gotByName, _ := indexByName(g)
			var out []string
			for _, name := range sortedKeys(byName) {
				gv, ok := gotByName[name]
				if !ok {
					out = append(out, fmt.Sprintf("%s[name=%s]: missing", path, name))
					continue
				}
				out = append(out, missing(byName[name], gv, fmt.Sprintf("%s[name=%s]", path, name))...)
			}
			return out
		}
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: want %d items, got %v", path, len(w), got)}
		}
		var out []string
		for i := range w {
			out = append(out, missing(w[i], g[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	default:
		if !reflect.DeepEqual(want, got) {
			return []string{fmt.Sprintf("%s: want %v, got %v", path, want, got)}
		}
		return nil
	}
}

// indexByName maps the items of a list of objects by their "name" field; it
// reports false unless every item is an object with a string name.
func indexByName(items []any) (map[string]any, bool) {
	out := map[string]any{}
	for _, item := range items {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, false
		}
		name, ok := m["name"].(string)
		if !ok {
			return nil, false
		}
		out[name] = m
	}
	return out, len(items) > 0
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
