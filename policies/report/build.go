package report

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// Source names inplace as the engine of its results, as Kyverno's say
// "kyverno".
const Source = "inplace"

// OmittedPolicy is the policy of the result that ends a report listing
// fewer results than the audit found: its message says how many more.
const OmittedPolicy = "inplace-omitted-results"

// Summary counts a report's results by outcome (skip is never used).
type Summary struct {
	Pass  int64 `json:"pass"`
	Fail  int64 `json:"fail"`
	Warn  int64 `json:"warn"`
	Error int64 `json:"error"`
	Skip  int64 `json:"skip"`
}

func (s *Summary) count(o Outcome) {
	switch o {
	case Pass:
		s.Pass++
	case Fail:
		s.Fail++
	case Warn:
		s.Warn++
	case Error:
		s.Error++
	}
}

func (s Summary) total() int64 { return s.Pass + s.Fail + s.Warn + s.Error + s.Skip }

// Timestamp is a result's time, as the schema has it (a protobuf
// Timestamp).
type Timestamp struct {
	Seconds int64 `json:"seconds"`
	Nanos   int32 `json:"nanos"`
}

// TimestampOf is t as a result's timestamp.
func TimestampOf(t time.Time) Timestamp {
	return Timestamp{Seconds: t.Unix(), Nanos: int32(t.Nanosecond())}
}

// content is what the audit owns of a PolicyReport: every field but its
// metadata. The report covers its namespace: it has no scope, and one
// written with one loses it.
type content struct {
	Scope   *corev1.ObjectReference `json:"scope,omitempty"`
	Summary Summary                 `json:"summary"`
	Results []reportResult          `json:"results,omitempty"`
}

// reportResult is one entry of a report's results.
type reportResult struct {
	Source     string                   `json:"source,omitempty"`
	Policy     string                   `json:"policy"`
	Result     Outcome                  `json:"result,omitempty"`
	Message    string                   `json:"message,omitempty"`
	Timestamp  Timestamp                `json:"timestamp"`
	Scored     bool                     `json:"scored"`
	Resources  []corev1.ObjectReference `json:"resources,omitempty"`
	Properties map[string]string        `json:"properties,omitempty"`
}

// identity is a result less its timestamp: two results with the same
// identity say the same thing.
func (r reportResult) identity() string {
	r.Timestamp = Timestamp{}
	raw, _ := json.Marshal(r) // strings, bools and integers: cannot fail
	return string(raw)
}

func toReportResult(r Result) reportResult {
	return reportResult{
		Source:  Source,
		Policy:  r.Policy,
		Result:  r.Outcome,
		Message: r.Message,
		Scored:  true,
		Resources: []corev1.ObjectReference{{
			APIVersion: jobset.GroupVersion.String(),
			Kind:       jobset.Kind,
			Namespace:  r.JobSet.Namespace,
			Name:       r.JobSet.Name,
			UID:        r.JobSet.UID,
		}},
		Properties: map[string]string{"enforcementAction": r.Action},
	}
}

// build returns the content of a namespace's report: the kept results by
// policy, JobSet and message, then, if the namespace had more than it
// keeps, a last result saying how many more. The summary counts every
// result, listed or not (the last one aside). A result identical to one
// of stored keeps its timestamp, so that a report says since when each
// result holds and an unchanged namespace has an unchanged report; a new
// one takes now.
func build(ns *namespaceResults, max int, stored []reportResult, now Timestamp) content {
	since := make(map[string]Timestamp, len(stored))
	for _, r := range stored {
		since[r.identity()] = r.Timestamp
	}
	stamp := func(r reportResult) reportResult {
		if t, ok := since[r.identity()]; ok {
			r.Timestamp = t
		} else {
			r.Timestamp = now
		}
		return r
	}
	listed := slices.Clone(ns.kept)
	slices.SortFunc(listed, compareListed)
	c := content{Summary: ns.summary, Results: make([]reportResult, 0, len(listed)+1)}
	for _, r := range listed {
		c.Results = append(c.Results, stamp(toReportResult(r)))
	}
	if omitted := ns.summary.total() - int64(len(listed)); omitted > 0 {
		c.Results = append(c.Results, stamp(reportResult{
			Source: Source,
			Policy: OmittedPolicy,
			// Not a warning of any policy: the results it stands for are
			// skipped from the list, and counted in the summary.
			Result: Skip,
			Message: fmt.Sprintf("%d more results are not listed: a report lists at most %d, the most severe first (error, fail, warn, pass); the summary counts them all",
				omitted, max),
			Scored:     false,
			Properties: map[string]string{"omitted": strconv.FormatInt(omitted, 10)},
		}))
	}
	return c
}
