package policies

import (
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
