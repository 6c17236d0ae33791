package report

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestBuild(t *testing.T) {
	then, now := Timestamp{Seconds: 100, Nanos: 5}, Timestamp{Seconds: 200}
	js := func(name string) JobSet { return JobSet{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)} }
	fail := Result{Policy: "team", Action: "Deny", JobSet: js("a"), Outcome: Fail, Message: "no team"}
	pass := Result{Policy: "team", Action: "Deny", JobSet: js("b"), Outcome: Pass}
	other := Result{Policy: "other", Action: "Warn", JobSet: js("b"), Outcome: Warn, Message: "hm"}
	listed := func(r Result, at Timestamp) reportResult {
		return reportResult{
			Source: "inplace", Policy: r.Policy, Result: r.Outcome, Message: r.Message, Timestamp: at, Scored: true,
			Resources: []corev1.ObjectReference{{
				APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Namespace: "ns", Name: r.JobSet.Name, UID: r.JobSet.UID,
			}},
			Properties: map[string]string{"enforcementAction": r.Action},
		}
	}
	omitted := func(n string, at Timestamp) reportResult {
		return reportResult{
			Source: "inplace", Policy: OmittedPolicy, Result: Skip, Timestamp: at,
			Message:    n + " more results are not listed: a report lists at most 2, the most severe first (error, fail, warn, pass); the summary counts them all",
			Properties: map[string]string{"omitted": n},
		}
	}
	cases := map[string]struct {
		results []Result
		max     int
		stored  []reportResult
		want    content
	}{
		"new results take now, sorted by policy, JobSet and message": {
			results: []Result{pass, fail, other},
			want: content{
				Summary: Summary{Pass: 1, Fail: 1, Warn: 1},
				Results: []reportResult{listed(other, now), listed(fail, now), listed(pass, now)},
			},
		},
		"an unchanged result keeps its timestamp, a changed one does not": {
			results: []Result{pass, other},
			stored:  []reportResult{listed(fail, then), listed(other, then)},
			want: content{
				Summary: Summary{Pass: 1, Warn: 1},
				Results: []reportResult{listed(other, then), listed(pass, now)},
			},
		},
		"a result whose action changed is a new result": {
			results: []Result{{Policy: "team", Action: "Warn", JobSet: js("a"), Outcome: Fail, Message: "no team"}},
			stored:  []reportResult{listed(fail, then)},
			want: content{
				Summary: Summary{Fail: 1},
				Results: []reportResult{listed(Result{Policy: "team", Action: "Warn", JobSet: js("a"), Outcome: Fail, Message: "no team"}, now)},
			},
		},
		"more than max: the most severe listed, then how many more, counted in the summary": {
			results: []Result{pass, fail, other, {Policy: "team", Action: "Deny", JobSet: js("c"), Outcome: Pass}},
			max:     2,
			stored:  []reportResult{omitted("2", then)},
			want: content{
				Summary: Summary{Pass: 2, Fail: 1, Warn: 1},
				Results: []reportResult{listed(other, now), listed(fail, now), omitted("2", then)},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := &Results{Max: tc.max}
			r.Add(tc.results...)
			got := build(r.namespaces["ns"], r.max(), tc.stored, now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("content (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildTwiceIsUnchanged(t *testing.T) {
	r := &Results{}
	r.Add(Result{Policy: "p", Action: "Deny", JobSet: JobSet{Namespace: "ns", Name: "js"}, Outcome: Fail, Message: "m"})
	first := build(r.namespaces["ns"], r.max(), nil, Timestamp{Seconds: 1})
	second := build(r.namespaces["ns"], r.max(), first.Results, Timestamp{Seconds: 2})
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("the same results a second time (-first +second):\n%s", diff)
	}
}
