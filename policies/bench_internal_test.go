package policies

import (
	"fmt"
	"strings"
	"testing"
)

func BenchmarkInputConversion(b *testing.B) {
	obj := admitted(b, "inplace-story2.yaml", nil)
	for b.Loop() {
		if _, err := baseInput(Input{Operation: "CREATE", Object: obj}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEachBuiltin(b *testing.B) {
	names, _ := BuiltinNames()
	obj := admitted(b, "inplace-story2.yaml", nil)
	for _, keep := range names {
		var disabled []string
		for _, n := range names {
			if n != keep {
				disabled = append(disabled, n)
			}
		}
		e, err := NewEngine(disabled)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(keep, func(b *testing.B) {
			for b.Loop() {
				if _, err := e.Evaluate(b.Context(), Input{Operation: "CREATE", Object: obj}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAdminPolicies evaluates N admin policies with parameters on one
// JobSet, all matching or none.
func BenchmarkAdminPolicies(b *testing.B) {
	obj := admitted(b, "inplace-story2.yaml", nil)
	names, _ := BuiltinNames()
	for _, n := range []int{1, 100, 1000} {
		for _, matching := range []bool{true, false} {
			e, err := NewEngine(names)
			if err != nil {
				b.Fatal(err)
			}
			match := func(in Input) bool { return in.Namespace == "prod" }
			if matching {
				match = nil
			}
			for i := range n {
				src := strings.Replace(maxRestartsPolicy, "package guardrails.maxrestarts", fmt.Sprintf("package guardrails.maxrestarts_%d", i), 1)
				p, err := Compile(Source{Name: fmt.Sprintf("p%04d", i), Rego: src, Action: Deny, Match: match, Parameters: map[string]any{"limit": 100}})
				if err != nil {
					b.Fatal(err)
				}
				e.SetPolicy(p)
			}
			b.Run(fmt.Sprintf("policies=%d/matching=%v", n, matching), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := e.Evaluate(b.Context(), Input{Operation: "CREATE", Object: obj, Namespace: "dev"}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
