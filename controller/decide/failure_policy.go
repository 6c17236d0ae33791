package decide

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/state"
)

// failureOutcome is what the failure policy decided for a set of failed Jobs.
type failureOutcome struct {
	// action to run; empty means the JobSet has no failure policy and fails.
	action jobset.FailurePolicyAction
	// rule that matched; empty when the default action applies.
	rule string
	// job is the failed Job the decision is about.
	job *batchv1.Job
}

// decideFailure picks the action for the failed Jobs of the current attempt:
// rules are tried in order and the first rule matching any failed Job wins,
// with the earliest failure among the Jobs it matches. Without a matching
// rule the action is RestartJobSet for the earliest failure; without a
// failure policy the JobSet fails.
func decideFailure(js *jobset.JobSet, failed []*batchv1.Job) failureOutcome {
	if js.Spec.FailurePolicy == nil {
		return failureOutcome{job: earliestFailure(failed, func(*batchv1.Job) bool { return true })}
	}
	for i, rule := range js.Spec.FailurePolicy.Rules {
		if job := earliestFailure(failed, func(j *batchv1.Job) bool { return ruleMatches(rule, j) }); job != nil {
			name := rule.Name
			if name == "" {
				name = jobset.DefaultRuleName(i)
			}
			return failureOutcome{action: rule.Action, rule: name, job: job}
		}
	}
	return failureOutcome{
		action: jobset.RestartJobSet,
		job:    earliestFailure(failed, func(*batchv1.Job) bool { return true }),
	}
}

// earliestFailure returns the Job among failed that matches and whose Failed
// condition is the oldest; ties go to the smaller name, so that the choice
// does not depend on list order.
func earliestFailure(failed []*batchv1.Job, match func(*batchv1.Job) bool) *batchv1.Job {
	var best *batchv1.Job
	var bestTime metav1.Time
	for _, job := range failed {
		c := state.JobCondition(job, batchv1.JobFailed)
		if c == nil || !match(job) {
			continue
		}
		if best == nil || c.LastTransitionTime.Before(&bestTime) ||
			(c.LastTransitionTime.Equal(&bestTime) && job.Name < best.Name) {
			best, bestTime = job, c.LastTransitionTime
		}
	}
	return best
}

// ruleMatches reports whether a failed Job meets every requirement of rule:
// its failure reason, its failure message and its replicated Job.
func ruleMatches(rule jobset.FailurePolicyRule, job *batchv1.Job) bool {
	c := state.JobCondition(job, batchv1.JobFailed)
	if c == nil {
		return false
	}
	if len(rule.OnJobFailureReasons) > 0 && !slices.Contains(rule.OnJobFailureReasons, c.Reason) {
		return false
	}
	if len(rule.TargetReplicatedJobs) > 0 && !slices.Contains(rule.TargetReplicatedJobs, job.Labels[jobset.ReplicatedJobNameKey]) {
		return false
	}
	if len(rule.OnJobFailureMessagePatterns) > 0 {
		return slices.ContainsFunc(rule.OnJobFailureMessagePatterns, func(pattern string) bool {
			// Patterns are validated at admission; one that does not compile
			// matches nothing rather than everything.
			re := patterns.compiled(pattern)
			return re != nil && re.MatchString(c.Message)
		})
	}
	return true
}

// applyFailure runs the decided action: it applies the row of the table
// the action and the JobSet's state make.
func (p *Plan) applyFailure(js *jobset.JobSet, o failureOutcome, now metav1.Time) {
	maxRestarts := int32(0)
	if js.Spec.FailurePolicy != nil {
		maxRestarts = js.Spec.FailurePolicy.MaxRestarts
	}
	withJob := func(msg string) string { return fmt.Sprintf("%s (first failed job: %s)", msg, o.job.Name) }
	failWith := func(reason, msg string) { p.apply(js, fail, move{reason: reason, message: withJob(msg)}, now) }

	switch o.action {
	case "":
		failWith(ReasonFailedJobs, MessageFailedJobs)
		return
	case jobset.FailJobSet:
		failWith(ReasonFailJobSetAction, MessageFailJobSetAction)
		return
	case jobset.RestartJobSet, jobset.RestartJob:
		if countedRestarts(&p.Status) >= maxRestarts {
			failWith(ReasonReachedMaxRestarts, MessageReachedMaxRestarts)
			return
		}
	}

	switch o.action {
	case jobset.RestartJobSet, jobset.RestartJobSetAndIgnoreMaxRestarts:
		reason := ReasonRestartDefaultPolicy
		if o.rule != "" {
			reason = fmt.Sprintf(reasonRestartRuleFormat, o.rule)
		}
		event := Event{corev1.EventTypeWarning, ReasonRestartJobSetAction, withJob(MessageRestartJobSetAction)}
		if o.action == jobset.RestartJobSetAndIgnoreMaxRestarts {
			event = Event{corev1.EventTypeWarning, ReasonRestartJobSetIgnoreMax, withJob(MessageRestartJobSetIgnoreMax)}
		}
		p.apply(js, restartJobSet, move{reason: reason, message: fmt.Sprintf("restart attempt %d after job %s failed", p.Status.Restarts+1, o.job.Name),
			event: &event, uncounted: o.action == jobset.RestartJobSetAndIgnoreMaxRestarts}, now)
		return
	case jobset.RestartJob, jobset.RestartJobAndIgnoreMaxRestarts:
		if _, _, err := jobIndex(js, o.job); err != nil {
			// Unreachable: a Job whose index is not its replicated job's
			// is of no attempt (isCurrentAttempt) and never failed here.
			// Should it be, nothing is decided.
			return
		}
		counted := o.action == jobset.RestartJob
		event := Event{corev1.EventTypeWarning, ReasonRestartJobAction, withJob(MessageRestartJobAction)}
		if !counted {
			event = Event{corev1.EventTypeWarning, ReasonRestartJobIgnoreMax, withJob(MessageRestartJobIgnoreMax)}
		}
		m := move{event: &event, uncounted: !counted, job: o.job}
		if jobset.InPlaceActive(js) && jobset.RestartStateOf(js, &p.Status) == jobset.StateRunning {
			// The rest of the group restarts in place around the recreated
			// Job, as part of this restart: it is counted here, once, and
			// the synced group's loss must not count it again as an
			// in-place restart.
			m.reason = ReasonInPlaceRestart
			m.message = fmt.Sprintf("job %s is recreated by its failure policy and the other Pods restart in place; epoch %d deprecated", o.job.Name, p.Status.SyncedEpoch)
			p.apply(js, restartOneJobInPlace, m, now)
			return
		}
		p.apply(js, restartOneJob, m, now)
		return
	}
	// An action the schema does not allow; fail rather than loop.
	failWith(ReasonFailedJobs, fmt.Sprintf("unknown failure policy action %q", o.action))
}

// jobIndex is the replicated job and index of a Job of js, read from its
// labels.
func jobIndex(js *jobset.JobSet, job *batchv1.Job) (string, int, error) {
	rjName := job.Labels[jobset.ReplicatedJobNameKey]
	replicas := jobset.ReplicasOf(js, rjName)
	index, err := strconv.Atoi(job.Labels[jobset.JobIndexKey])
	if err != nil || index < 0 || index >= replicas {
		return "", 0, fmt.Errorf("its label %s is %q, not an index of replicated job %q (%d replicas)", jobset.JobIndexKey, job.Labels[jobset.JobIndexKey], rjName, replicas)
	}
	return rjName, index, nil
}

// restartJob bumps the individual restart counter of the failed Job's index,
// which makes that Job alone outdated, deleted and created again.
func restartJob(js *jobset.JobSet, status *jobset.JobSetStatus, job *batchv1.Job, counted bool) error {
	rjName, index, err := jobIndex(js, job)
	if err != nil {
		return err
	}
	replicas := jobset.ReplicasOf(js, rjName)
	for i := range status.ReplicatedJobsStatus {
		s := &status.ReplicatedJobsStatus[i]
		if s.Name != rjName {
			continue
		}
		s.JobRestarts = grown(s.JobRestarts, replicas)
		s.JobRestarts[index]++
		if counted {
			s.JobRestartsCountTowardsMax = grown(s.JobRestartsCountTowardsMax, replicas)
			s.JobRestartsCountTowardsMax[index]++
		}
	}
	return nil
}

// grown returns counters extended with zeros to at least n entries.
func grown(counters []int32, n int) []int32 {
	if len(counters) >= n {
		return counters
	}
	return append(counters, make([]int32, n-len(counters))...)
}

// patterns memoizes the compiled onJobFailureMessagePatterns: a JobSet's
// rules are matched against every failed Job on every reconcile that sees
// one, and a pattern is compiled once, not each time. Bounded: past
// maxPatterns distinct patterns it starts afresh.
var patterns = &patternCache{byPattern: map[string]*regexp.Regexp{}}

const maxPatterns = 1024

type patternCache struct {
	mu        sync.Mutex
	byPattern map[string]*regexp.Regexp
}

// compiled returns the compiled pattern, nil if it does not compile.
func (c *patternCache) compiled(pattern string) *regexp.Regexp {
	c.mu.Lock()
	defer c.mu.Unlock()
	if re, ok := c.byPattern[pattern]; ok {
		return re
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		re = nil
	}
	if len(c.byPattern) >= maxPatterns {
		clear(c.byPattern)
	}
	c.byPattern[pattern] = re
	return re
}
