package policies

import (
	"context"
	"testing"

	"github.com/inplace-dev/inplace/policies/builtin"
)

// TestBuiltinRegoTests runs the Rego tests beside every built-in policy.
func TestBuiltinRegoTests(t *testing.T) {
	results, err := RunRegoTests(context.Background(), builtin.FS)
	if err != nil {
		t.Fatal(err)
	}
	names, err := BuiltinNames()
	if err != nil {
		t.Fatal(err)
	}
	tested := map[string]int{}
	for _, r := range results {
		t.Run(r.Name, func(t *testing.T) {
			if !r.Passed {
				t.Errorf("%s", r.Detail)
			}
		})
		for _, n := range names {
			if len(r.Name) > len("inplace.builtin."+n+"_test.") && r.Name[:len("inplace.builtin."+n+"_test.")] == "inplace.builtin."+n+"_test." {
				tested[n]++
			}
		}
	}
	for _, n := range names {
		if tested[n] == 0 {
			t.Errorf("built-in policy %s has no Rego tests", n)
		}
	}
}
