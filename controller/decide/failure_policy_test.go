package decide

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

func TestDecideFailure(t *testing.T) {
	js := testJobSet("workers", 3, "ps", 1)
	early := func() *batchv1.Job {
		return failedJob(jobOf(js, "workers", 1), "BackoffLimitExceeded", "too many", at(1))
	}
	late := func() *batchv1.Job {
		return failedJob(jobOf(js, "workers", 0), "PodFailurePolicy", "exit code 3", at(5))
	}
	ps := func() *batchv1.Job { return failedJob(jobOf(js, "ps", 0), "DeadlineExceeded", "slow", at(3)) }

	cases := map[string]struct {
		policy     *jobset.FailurePolicy
		failed     []*batchv1.Job
		wantAction jobset.FailurePolicyAction
		wantRule   string
		wantJob    string
	}{
		"no failure policy: fail with the earliest failure": {
			failed:  []*batchv1.Job{late(), early()},
			wantJob: "js-workers-1",
		},
		"no rules: RestartJobSet for the earliest failure": {
			policy:     &jobset.FailurePolicy{},
			failed:     []*batchv1.Job{late(), early()},
			wantAction: jobset.RestartJobSet, wantJob: "js-workers-1",
		},
		"first matching rule wins, with the earliest Job it matches": {
			policy: &jobset.FailurePolicy{Rules: []jobset.FailurePolicyRule{
				{Name: "fatal", Action: jobset.FailJobSet, OnJobFailureReasons: []string{"PodFailurePolicy"}},
				{Name: "any", Action: jobset.RestartJobSetAndIgnoreMaxRestarts},
			}},
			failed:     []*batchv1.Job{early(), late()},
			wantAction: jobset.FailJobSet, wantRule: "fatal", wantJob: "js-workers-0",
		},
		"rule order beats failure order": {
			policy: &jobset.FailurePolicy{Rules: []jobset.FailurePolicyRule{
				{Name: "ps", Action: jobset.RestartJobSet, TargetReplicatedJobs: []string{"ps"}},
				{Name: "workers", Action: jobset.RestartJobSetAndIgnoreMaxRestarts, TargetReplicatedJobs: []string{"workers"}},
			}},
			failed:     []*batchv1.Job{early(), ps()},
			wantAction: jobset.RestartJobSet, wantRule: "ps", wantJob: "js-ps-0",
		},
		"targetReplicatedJobs not matching: default action": {
			policy: &jobset.FailurePolicy{Rules: []jobset.FailurePolicyRule{
				{Name: "ps", Action: jobset.FailJobSet, TargetReplicatedJobs: []string{"ps"}},
			}},
			failed:     []*batchv1.Job{early()},
			wantAction: jobset.RestartJobSet, wantJob: "js-workers-1",
		},
		"message pattern matches": {
			policy: &jobset.FailurePolicy{Rules: []jobset.FailurePolicyRule{
				{Name: "code3", Action: jobset.FailJobSet, OnJobFailureMessagePatterns: []string{`exit code [34]$`}},
			}},
			failed:     []*batchv1.Job{early(), late()},
			wantAction: jobset.FailJobSet, wantRule: "code3", wantJob: "js-workers-0",
		},
		"message pattern does not match: default action": {
			policy: &jobset.FailurePolicy{Rules: []jobset.FailurePolicyRule{
				{Name: "oom", Action: jobset.FailJobSet, OnJobFailureMessagePatterns: []string{`OOMKilled`}},
			}},
			failed:     []*batchv1.Job{late()},
			wantAction: jobset.RestartJobSet, wantJob: "js-workers-0",
		},
		"reason and pattern must both match": {
			policy: &jobset.FailurePolicy{Rules: []jobset.FailurePolicyRule{
				{Name: "both", Action: jobset.FailJobSet, OnJobFailureReasons: []string{"BackoffLimitExceeded"}, OnJobFailureMessagePatterns: []string{"exit code"}},
			}},
			failed:     []*batchv1.Job{early(), late()},
			wantAction: jobset.RestartJobSet, wantJob: "js-workers-1",
		},
		"an invalid pattern matches nothing": {
			policy: &jobset.FailurePolicy{Rules: []jobset.FailurePolicyRule{
				{Name: "bad", Action: jobset.FailJobSet, OnJobFailureMessagePatterns: []string{`(`}},
			}},
			failed:     []*batchv1.Job{late()},
			wantAction: jobset.RestartJobSet, wantJob: "js-workers-0",
		},
		"unnamed rule gets its default name": {
			policy: &jobset.FailurePolicy{Rules: []jobset.FailurePolicyRule{
				{Action: jobset.RestartJobSetAndIgnoreMaxRestarts}, {Action: jobset.FailJobSet},
			}},
			failed:     []*batchv1.Job{late()},
			wantAction: jobset.RestartJobSetAndIgnoreMaxRestarts, wantRule: "failurePolicyRule0", wantJob: "js-workers-0",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			js := js.DeepCopy()
			js.Spec.FailurePolicy = tc.policy
			got := decideFailure(js, tc.failed)
			type outcome struct {
				Action jobset.FailurePolicyAction
				Rule   string
				Job    string
			}
			want := outcome{tc.wantAction, tc.wantRule, tc.wantJob}
			if diff := cmp.Diff(want, outcome{got.action, got.rule, got.job.Name}); diff != "" {
				t.Errorf("decideFailure (-want +got):\n%s", diff)
			}
		})
	}
}

func TestApplyFailureCountsRestartsExactly(t *testing.T) {
	for _, maxRestarts := range []int32{0, 1, 3} {
		js := testJobSet("workers", 2)
		js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: maxRestarts}
		status := &js.Status
		restarts := int32(0)
		for range maxRestarts + 1 {
			if jobset.Finished(status) {
				break
			}
			job := failedJob(jobOf(js, "workers", 0), "BackoffLimitExceeded", "", at(0))
			p := Plan{Status: *status}
			p.applyFailure(js, failureOutcome{action: jobset.RestartJobSet, job: job}, at(0))
			*status = p.Status
			if !jobset.Finished(status) {
				restarts++
			}
		}
		if restarts != maxRestarts {
			t.Errorf("maxRestarts=%d: %d restarts happened", maxRestarts, restarts)
		}
		if status.Restarts != maxRestarts || status.RestartsCountTowardsMax != maxRestarts {
			t.Errorf("maxRestarts=%d: status restarts=%d counted=%d", maxRestarts, status.Restarts, status.RestartsCountTowardsMax)
		}
		if c := findCondition(status, jobset.JobSetFailed); c == nil || c.Reason != ReasonReachedMaxRestarts {
			t.Errorf("maxRestarts=%d: want Failed with %s, got %+v", maxRestarts, ReasonReachedMaxRestarts, c)
		}
	}
}

func TestApplyFailure(t *testing.T) {
	js := testJobSet("workers", 3)
	job := func() *batchv1.Job { return failedJob(jobOf(js, "workers", 2), "PodFailurePolicy", "", at(0)) }
	cases := map[string]struct {
		maxRestarts int32
		status      jobset.JobSetStatus
		outcome     failureOutcome
		want        jobset.JobSetStatus
		wantEvent   string
	}{
		"no failure policy fails": {
			outcome: failureOutcome{job: job()},
			want: jobset.JobSetStatus{TerminalState: "Failed", Conditions: []metav1.Condition{
				{Type: "Failed", Status: "True", Reason: ReasonFailedJobs, Message: MessageFailedJobs + " (first failed job: js-workers-2)"},
			}},
			wantEvent: ReasonFailedJobs,
		},
		"FailJobSet fails whatever the restarts left": {
			maxRestarts: 5,
			outcome:     failureOutcome{action: jobset.FailJobSet, rule: "r", job: job()},
			want: jobset.JobSetStatus{TerminalState: "Failed", Conditions: []metav1.Condition{
				{Type: "Failed", Status: "True", Reason: ReasonFailJobSetAction, Message: MessageFailJobSetAction + " (first failed job: js-workers-2)"},
			}},
			wantEvent: ReasonFailJobSetAction,
		},
		"RestartJobSet counts": {
			maxRestarts: 1,
			outcome:     failureOutcome{action: jobset.RestartJobSet, rule: "retry", job: job()},
			want: jobset.JobSetStatus{Restarts: 1, RestartsCountTowardsMax: 1, Conditions: []metav1.Condition{
				{Type: "RestartingJobSet", Status: "True", Reason: "FailurePolicy_retry", Message: "restart attempt 1 after job js-workers-2 failed"},
			}},
			wantEvent: ReasonRestartJobSetAction,
		},
		"RestartJobSetAndIgnoreMaxRestarts does not count, even past the max": {
			status:  jobset.JobSetStatus{Restarts: 4},
			outcome: failureOutcome{action: jobset.RestartJobSetAndIgnoreMaxRestarts, job: job()},
			want: jobset.JobSetStatus{Restarts: 5, Conditions: []metav1.Condition{
				{Type: "RestartingJobSet", Status: "True", Reason: ReasonRestartDefaultPolicy, Message: "restart attempt 5 after job js-workers-2 failed"},
			}},
			wantEvent: ReasonRestartJobSetIgnoreMax,
		},
		"RestartJob bumps only the failed index": {
			maxRestarts: 2,
			status:      jobset.JobSetStatus{ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{{Name: "workers"}}},
			outcome:     failureOutcome{action: jobset.RestartJob, job: job()},
			want: jobset.JobSetStatus{ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{
				{Name: "workers", JobRestarts: []int32{0, 0, 1}, JobRestartsCountTowardsMax: []int32{0, 0, 1}},
			}},
			wantEvent: ReasonRestartJobAction,
		},
		"RestartJob counts individual restarts towards the max": {
			maxRestarts: 2,
			status: jobset.JobSetStatus{RestartsCountTowardsMax: 1, ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{
				{Name: "workers", JobRestarts: []int32{1}, JobRestartsCountTowardsMax: []int32{1}},
			}},
			outcome: failureOutcome{action: jobset.RestartJob, job: job()},
			want: jobset.JobSetStatus{TerminalState: "Failed", RestartsCountTowardsMax: 1, ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{
				{Name: "workers", JobRestarts: []int32{1}, JobRestartsCountTowardsMax: []int32{1}},
			}, Conditions: []metav1.Condition{
				{Type: "Failed", Status: "True", Reason: ReasonReachedMaxRestarts, Message: MessageReachedMaxRestarts + " (first failed job: js-workers-2)"},
			}},
			wantEvent: ReasonReachedMaxRestarts,
		},
		"RestartJobAndIgnoreMaxRestarts does not count": {
			status:  jobset.JobSetStatus{ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{{Name: "workers"}}},
			outcome: failureOutcome{action: jobset.RestartJobAndIgnoreMaxRestarts, job: job()},
			want: jobset.JobSetStatus{ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{
				{Name: "workers", JobRestarts: []int32{0, 0, 1}},
			}},
			wantEvent: ReasonRestartJobIgnoreMax,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			js := js.DeepCopy()
			if tc.outcome.action != "" {
				js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: tc.maxRestarts}
			}
			status := tc.status.DeepCopy()
			p := Plan{Status: *status}
			p.applyFailure(js, tc.outcome, at(0))
			status, events := &p.Status, p.Events
			if diff := cmp.Diff(tc.want, *status, ignoreCondTime); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if len(events) != 1 || events[0].Reason != tc.wantEvent {
				t.Errorf("events = %+v, want one with reason %s", events, tc.wantEvent)
			}
		})
	}
}

func findCondition(status *jobset.JobSetStatus, t jobset.JobSetConditionType) *metav1.Condition {
	for i := range status.Conditions {
		if status.Conditions[i].Type == string(t) {
			return &status.Conditions[i]
		}
	}
	return nil
}

func TestPatternCache(t *testing.T) {
	c := &patternCache{byPattern: map[string]*regexp.Regexp{}}
	re := c.compiled("^Pod .* failed$")
	if re == nil || c.compiled("^Pod .* failed$") != re {
		t.Fatalf("a pattern is compiled again, or not at all")
	}
	if c.compiled("(") != nil {
		t.Errorf("a pattern that does not compile matches something")
	}
	for i := range maxPatterns + 1 {
		c.compiled(fmt.Sprintf("p%d", i))
	}
	if n := len(c.byPattern); n > maxPatterns {
		t.Errorf("%d patterns kept, want at most %d", n, maxPatterns)
	}
}
