package report

import (
	"cmp"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/inplace-dev/inplace/policies"
)

// Outcome is a result's verdict, in the PolicyReport's words.
type Outcome string

const (
	// Pass: the policy applied to the JobSet and said nothing.
	Pass Outcome = "pass"
	// Fail: a message of a Deny or DryRun policy.
	Fail Outcome = "fail"
	// Warn: a message of a Warn policy, or of any policy's warn rule.
	Warn Outcome = "warn"
	// Error: the policy's evaluation failed.
	Error Outcome = "error"
	// Skip: results a report does not list (see OmittedPolicy); never a
	// JobSet's own.
	Skip Outcome = "skip"
)

// severity orders outcomes for the results a report keeps when it cannot
// list them all: the ones that need a person first.
var severity = map[Outcome]int{Error: 0, Fail: 1, Warn: 2, Pass: 3}

// JobSet names the JobSet a result is about.
type JobSet struct {
	Namespace string
	Name      string
	UID       types.UID
}

// Result is what one policy concluded of one JobSet: a pass, or one of its
// messages.
type Result struct {
	Policy string
	// Action is the policy's enforcementAction.
	Action  string
	JobSet  JobSet
	Outcome Outcome
	Message string
}

// FromDecision turns the audit's decision on one JobSet into its results.
// Each policy that applied passes if it said nothing, and otherwise has
// one result per message:
//
//	Denied  a Deny policy's deny rule                 fail
//	Warned  a Warn policy's deny rule, a warn rule     warn
//	DryRun  every message of a DryRun policy          fail
//	any     an evaluation that failed                 error
//
// actions are the enforcement actions of the policies the audit listed, by
// name; a policy not among them (deleted since) has no results.
func FromDecision(js JobSet, d policies.Decision, actions map[string]string) []Result {
	said := map[string]bool{}
	var out []Result
	for _, group := range []struct {
		violations []policies.Violation
		outcome    Outcome
	}{{d.Denied, Fail}, {d.Warned, Warn}, {d.DryRun, Fail}} {
		for _, v := range group.violations {
			action, ok := actions[v.Policy]
			if !ok {
				continue
			}
			said[v.Policy] = true
			outcome := group.outcome
			if v.Failed {
				outcome = Error
			}
			out = append(out, Result{Policy: v.Policy, Action: action, JobSet: js, Outcome: outcome, Message: v.Message})
		}
	}
	for _, p := range d.Evaluated {
		if action, ok := actions[p]; ok && !said[p] {
			out = append(out, Result{Policy: p, Action: action, JobSet: js, Outcome: Pass})
		}
	}
	// A DryRun policy's deny and warn rules may say the same thing.
	slices.SortFunc(out, compareListed)
	return slices.Compact(out)
}

// compareListed is the order of a report's results: by policy, JobSet and
// message (the outcome breaks the last ties).
func compareListed(a, b Result) int {
	return cmp.Or(cmp.Compare(a.Policy, b.Policy), cmp.Compare(a.JobSet.Name, b.JobSet.Name), cmp.Compare(a.JobSet.UID, b.JobSet.UID),
		cmp.Compare(a.Message, b.Message), cmp.Compare(a.Outcome, b.Outcome), cmp.Compare(a.Action, b.Action))
}

// compareKept is the order in which a namespace keeps its results when it
// has more than it lists: the most severe first, then as listed.
func compareKept(a, b Result) int {
	return cmp.Or(cmp.Compare(severity[a.Outcome], severity[b.Outcome]), compareListed(a, b))
}

// DefaultMaxResults bounds the results one PolicyReport lists. A report is
// one object in etcd, whose limit is 1.5 MiB: 1,000 results of a few
// hundred bytes each leave room for long messages.
const DefaultMaxResults = 1000

// Results gathers the results of one audit by namespace. Each namespace
// keeps its counts and at most Max results, the most severe (errors, then
// fails, warns and passes, each in the listed order): memory grows with the
// namespaces, not with the JobSets. The zero value is ready to use; it is
// not safe for concurrent use.
type Results struct {
	// Max bounds the results a namespace keeps; 0 means DefaultMaxResults.
	Max int

	namespaces map[string]*namespaceResults
}

// namespaceResults are one namespace's results: every one counted, the
// first max of them by compareKept kept.
type namespaceResults struct {
	summary Summary
	kept    []Result
}

func (r *Results) max() int {
	if r.Max > 0 {
		return r.Max
	}
	return DefaultMaxResults
}

// Add records results, each in the namespace of its JobSet.
func (r *Results) Add(results ...Result) {
	for _, res := range results {
		if r.namespaces == nil {
			r.namespaces = map[string]*namespaceResults{}
		}
		ns := r.namespaces[res.JobSet.Namespace]
		if ns == nil {
			ns = &namespaceResults{}
			r.namespaces[res.JobSet.Namespace] = ns
		}
		ns.summary.count(res.Outcome)
		i, _ := slices.BinarySearchFunc(ns.kept, res, compareKept)
		if i >= r.max() {
			continue
		}
		ns.kept = slices.Insert(ns.kept, i, res)
		if len(ns.kept) > r.max() {
			ns.kept = ns.kept[:r.max()]
		}
	}
}

// Namespaces lists the namespaces with results, sorted.
func (r *Results) Namespaces() []string {
	out := make([]string, 0, len(r.namespaces))
	for ns := range r.namespaces {
		out = append(out, ns)
	}
	slices.Sort(out)
	return out
}
