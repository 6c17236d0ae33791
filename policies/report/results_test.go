package report

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/inplace-dev/inplace/policies"
)

func TestFromDecision(t *testing.T) {
	js := JobSet{Namespace: "ns", Name: "js", UID: "uid-1"}
	actions := map[string]string{"deny": "Deny", "warn": "Warn", "dry": "DryRun", "quiet": "Deny"}
	cases := map[string]struct {
		decision policies.Decision
		want     []Result
	}{
		"a policy that said nothing passes": {
			decision: policies.Decision{Evaluated: []string{"quiet"}},
			want:     []Result{{Policy: "quiet", Action: "Deny", JobSet: js, Outcome: Pass}},
		},
		"a result per message, by what it did": {
			decision: policies.Decision{
				Evaluated: []string{"deny", "dry", "quiet", "warn"},
				Denied:    []policies.Violation{{Policy: "deny", Message: "b"}, {Policy: "deny", Message: "a"}},
				Warned:    []policies.Violation{{Policy: "warn", Message: "w"}, {Policy: "deny", Message: "from its warn rule"}},
				DryRun:    []policies.Violation{{Policy: "dry", Message: "d"}},
			},
			want: []Result{
				{Policy: "deny", Action: "Deny", JobSet: js, Outcome: Fail, Message: "a"},
				{Policy: "deny", Action: "Deny", JobSet: js, Outcome: Fail, Message: "b"},
				{Policy: "deny", Action: "Deny", JobSet: js, Outcome: Warn, Message: "from its warn rule"},
				{Policy: "dry", Action: "DryRun", JobSet: js, Outcome: Fail, Message: "d"},
				{Policy: "quiet", Action: "Deny", JobSet: js, Outcome: Pass},
				{Policy: "warn", Action: "Warn", JobSet: js, Outcome: Warn, Message: "w"},
			},
		},
		"an evaluation that failed is an error, whatever the action": {
			decision: policies.Decision{
				Evaluated: []string{"deny", "warn"},
				Denied:    []policies.Violation{{Policy: "deny", Message: "evaluation failed: x", Failed: true, Inexact: true}},
				Warned:    []policies.Violation{{Policy: "warn", Message: "evaluation failed: y", Failed: true, Inexact: true}},
			},
			want: []Result{
				{Policy: "deny", Action: "Deny", JobSet: js, Outcome: Error, Message: "evaluation failed: x"},
				{Policy: "warn", Action: "Warn", JobSet: js, Outcome: Error, Message: "evaluation failed: y"},
			},
		},
		"a DryRun policy's deny and warn saying the same thing: one result": {
			decision: policies.Decision{
				Evaluated: []string{"dry"},
				DryRun:    []policies.Violation{{Policy: "dry", Message: "same"}, {Policy: "dry", Message: "same"}},
			},
			want: []Result{{Policy: "dry", Action: "DryRun", JobSet: js, Outcome: Fail, Message: "same"}},
		},
		"a policy the audit did not list has no results": {
			decision: policies.Decision{
				Evaluated: []string{"gone", "quiet"},
				Denied:    []policies.Violation{{Policy: "gone", Message: "m"}},
			},
			want: []Result{{Policy: "quiet", Action: "Deny", JobSet: js, Outcome: Pass}},
		},
		"no policy applied: no results": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := FromDecision(js, tc.decision, actions)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResultsKeepTheMostSevere(t *testing.T) {
	r := &Results{Max: 3}
	result := func(ns, js string, o Outcome) Result {
		return Result{Policy: "p", Action: "Deny", JobSet: JobSet{Namespace: ns, Name: js}, Outcome: o, Message: string(o)}
	}
	r.Add(result("a", "js-1", Pass), result("a", "js-2", Pass), result("a", "js-3", Fail), result("b", "js-1", Warn))
	r.Add(result("a", "js-4", Pass), result("a", "js-5", Error), result("a", "js-6", Warn))

	if diff := cmp.Diff([]string{"a", "b"}, r.Namespaces()); diff != "" {
		t.Errorf("namespaces (-want +got):\n%s", diff)
	}
	a := r.namespaces["a"]
	if diff := cmp.Diff(Summary{Pass: 3, Fail: 1, Warn: 1, Error: 1}, a.summary); diff != "" {
		t.Errorf("summary of a (-want +got):\n%s", diff)
	}
	want := []Result{result("a", "js-5", Error), result("a", "js-3", Fail), result("a", "js-6", Warn)}
	if diff := cmp.Diff(want, a.kept); diff != "" {
		t.Errorf("kept in a (-want +got):\n%s", diff)
	}
}

func TestResultsDefaultBound(t *testing.T) {
	r := &Results{}
	for i := range DefaultMaxResults + 5 {
		r.Add(Result{Policy: "p", JobSet: JobSet{Namespace: "ns", Name: fmt.Sprintf("js-%05d", i)}, Outcome: Pass})
	}
	if got := len(r.namespaces["ns"].kept); got != DefaultMaxResults {
		t.Errorf("kept %d results, want %d", got, DefaultMaxResults)
	}
	if got := r.namespaces["ns"].summary.Pass; got != DefaultMaxResults+5 {
		t.Errorf("counted %d passes, want %d", got, DefaultMaxResults+5)
	}
}
