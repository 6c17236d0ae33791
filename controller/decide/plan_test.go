package decide

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

func TestDecideCreatesEveryJobAndTheServiceOnce(t *testing.T) {
	js := testJobSet("driver", 1, "workers", 2)
	p := decidePure(t, js, Observed{}, at(0), time.Minute)
	if diff := cmp.Diff([]string{"js-driver-0", "js-workers-0", "js-workers-1"}, names(p.CreateJobs)); diff != "" {
		t.Errorf("created jobs (-want +got):\n%s", diff)
	}
	if p.Service == nil || p.Service.Name != "js" || p.Service.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("want headless service js, got %+v", p.Service)
	}

	// The same state observed again: nothing to do, status unchanged.
	js.Status = p.Status
	again := decidePure(t, js, Observed{Jobs: jobList(p.CreateJobs...), ServiceExists: true}, at(1), time.Minute)
	if len(again.CreateJobs)+len(again.DeleteJobs)+len(again.SuspendJobs)+len(again.ResumeJobs) != 0 || again.Service != nil {
		t.Errorf("second decide acts: %+v", again)
	}
	if diff := cmp.Diff(js.Status, again.Status); diff != "" {
		t.Errorf("second decide changes status (-want +got):\n%s", diff)
	}
}

func TestBuildJobLabels(t *testing.T) {
	js := testJobSet("driver", 1, "workers", 2)
	js.Spec.ReplicatedJobs[1].GroupName = "g"
	js.Spec.Coordinator = &jobset.Coordinator{ReplicatedJob: "driver"}
	js.Status.Restarts = 3
	job := buildJob(js, 1, 1, false, nil)

	want := map[string]string{
		jobset.JobSetNameKey:            "js",
		jobset.JobSetUIDKey:             "uid-1",
		jobset.ReplicatedJobNameKey:     "workers",
		jobset.ReplicatedJobReplicasKey: "2",
		jobset.GlobalReplicasKey:        "3",
		jobset.JobIndexKey:              "1",
		jobset.JobGlobalIndexKey:        "2",
		jobset.JobKey:                   jobKey("ns", "js-workers-1"),
		jobset.RestartsKey:              "3",
		jobset.JobRestartAttemptKey:     "0",
		jobset.GroupNameKey:             "g",
		jobset.GroupReplicasKey:         "2",
		jobset.JobGroupIndexKey:         "1",
		jobset.CoordinatorKey:           "js-driver-0-0.js",
	}
	for _, got := range []map[string]string{job.Labels, job.Annotations, job.Spec.Template.Labels, job.Spec.Template.Annotations} {
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("labels/annotations (-want +got):\n%s", diff)
		}
	}
	if job.Name != "js-workers-1" || job.Spec.Template.Spec.Subdomain != "js" {
		t.Errorf("name %s subdomain %q", job.Name, job.Spec.Template.Spec.Subdomain)
	}
	if ref := metav1.GetControllerOf(job); ref == nil || ref.UID != "uid-1" || ref.Kind != "JobSet" {
		t.Errorf("controller reference %+v", ref)
	}
	if ptr.Deref(job.Spec.CompletionMode, "") != batchv1.IndexedCompletion {
		t.Errorf("completion mode %v, want Indexed", job.Spec.CompletionMode)
	}
}

func TestDecideStartupInOrder(t *testing.T) {
	js := testJobSet("queue", 1, "driver", 2, "workers", 1)
	js.Spec.StartupPolicy.StartupPolicyOrder = jobset.InOrder

	p := decidePure(t, js, Observed{ServiceExists: true}, at(0), time.Minute)
	if diff := cmp.Diff([]string{"js-queue-0"}, names(p.CreateJobs)); diff != "" {
		t.Errorf("first wave (-want +got):\n%s", diff)
	}
	if c := findCondition(&p.Status, jobset.JobSetStartupPolicyInProgress); c == nil || c.Status != "True" || c.Message != "replicated job queue is starting" {
		t.Errorf("in-progress condition %+v", c)
	}

	js.Status = p.Status
	queue := readyJob(jobOf(js, "queue", 0))
	p = decidePure(t, js, Observed{Jobs: jobList(queue), ServiceExists: true}, at(1), time.Minute)
	if diff := cmp.Diff([]string{"js-driver-0", "js-driver-1"}, names(p.CreateJobs)); diff != "" {
		t.Errorf("second wave (-want +got):\n%s", diff)
	}

	js.Status = p.Status
	d0, d1 := readyJob(jobOf(js, "driver", 0)), jobOf(js, "driver", 1)
	p = decidePure(t, js, Observed{Jobs: jobList(queue, d0, d1), ServiceExists: true}, at(2), time.Minute)
	if len(p.CreateJobs) != 0 {
		t.Errorf("workers created before every driver is ready: %v", names(p.CreateJobs))
	}
	if c := findCondition(&p.Status, jobset.JobSetStartupPolicyInProgress); c.Message != "replicated job driver is starting" {
		t.Errorf("in-progress message %q", c.Message)
	}

	readyJob(d1)
	workers := readyJob(jobOf(js, "workers", 0))
	js.Status = p.Status
	p = decidePure(t, js, Observed{Jobs: jobList(queue, d0, d1, workers), ServiceExists: true}, at(3), time.Minute)
	if c := findCondition(&p.Status, jobset.JobSetStartupPolicyCompleted); c == nil || c.Status != "True" || c.Reason != ReasonInOrderCompleted {
		t.Errorf("completed condition %+v", c)
	}
	if c := findCondition(&p.Status, jobset.JobSetStartupPolicyInProgress); c.Status != "False" {
		t.Errorf("in-progress condition still %s", c.Status)
	}
}

func TestStartupGateDependsOn(t *testing.T) {
	js := testJobSet("init", 2, "main", 1)
	cases := map[string]struct {
		status    jobset.DependsOnStatus
		init      jobset.ReplicatedJobStatus
		wantAllow bool
	}{
		"Ready not reached":                   {jobset.DependencyReady, jobset.ReplicatedJobStatus{Name: "init", Ready: 1}, false},
		"Ready reached with ready and failed": {jobset.DependencyReady, jobset.ReplicatedJobStatus{Name: "init", Ready: 1, Failed: 1}, true},
		"Complete not reached by ready Jobs":  {jobset.DependencyComplete, jobset.ReplicatedJobStatus{Name: "init", Ready: 2}, false},
		"Complete reached":                    {jobset.DependencyComplete, jobset.ReplicatedJobStatus{Name: "init", Succeeded: 2}, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			js := js.DeepCopy()
			js.Spec.ReplicatedJobs[1].DependsOn = []jobset.DependsOn{{Name: "init", Status: tc.status}}
			got := startupGate(js, []jobset.ReplicatedJobStatus{tc.init})
			if diff := cmp.Diff([]bool{true, tc.wantAllow}, got); diff != "" {
				t.Errorf("startup gate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSuccessPolicy(t *testing.T) {
	js := testJobSet("driver", 1, "workers", 2)
	cases := map[string]struct {
		policy   jobset.SuccessPolicy
		statuses []jobset.ReplicatedJobStatus
		want     bool
	}{
		"All, everything succeeded": {
			jobset.SuccessPolicy{Operator: jobset.OperatorAll},
			[]jobset.ReplicatedJobStatus{{Name: "driver", Succeeded: 1}, {Name: "workers", Succeeded: 2}}, true,
		},
		"All, one Job left": {
			jobset.SuccessPolicy{Operator: jobset.OperatorAll},
			[]jobset.ReplicatedJobStatus{{Name: "driver", Succeeded: 1}, {Name: "workers", Succeeded: 1}}, false,
		},
		"All of the targets": {
			jobset.SuccessPolicy{Operator: jobset.OperatorAll, TargetReplicatedJobs: []string{"driver"}},
			[]jobset.ReplicatedJobStatus{{Name: "driver", Succeeded: 1}}, true,
		},
		"Any of the targets": {
			jobset.SuccessPolicy{Operator: jobset.OperatorAny, TargetReplicatedJobs: []string{"workers"}},
			[]jobset.ReplicatedJobStatus{{Name: "workers", Succeeded: 1}}, true,
		},
		"Any, but only an untargeted Job succeeded": {
			jobset.SuccessPolicy{Operator: jobset.OperatorAny, TargetReplicatedJobs: []string{"workers"}},
			[]jobset.ReplicatedJobStatus{{Name: "driver", Succeeded: 1}}, false,
		},
		"targets that do not exist never succeed": {
			jobset.SuccessPolicy{Operator: jobset.OperatorAll, TargetReplicatedJobs: []string{"nope"}},
			[]jobset.ReplicatedJobStatus{{Name: "driver", Succeeded: 1}, {Name: "workers", Succeeded: 2}}, false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			js := js.DeepCopy()
			js.Spec.SuccessPolicy = &tc.policy
			if got := successPolicyMet(js, tc.statuses); got != tc.want {
				t.Errorf("successPolicyMet = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDecideRestartDeletesPreviousAttemptAndRecreates(t *testing.T) {
	js := testJobSet("workers", 2)
	js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 3}
	old0, old1 := jobOf(js, "workers", 0), failedJob(jobOf(js, "workers", 1), "BackoffLimitExceeded", "", at(0))

	p := decidePure(t, js, Observed{Jobs: jobList(old0, old1), ServiceExists: true}, at(1), time.Minute)
	if p.Status.Restarts != 1 || len(p.CreateJobs) != 0 {
		t.Fatalf("want restart recorded without creating, got restarts=%d creates=%v", p.Status.Restarts, names(p.CreateJobs))
	}

	js.Status = p.Status
	p = decidePure(t, js, Observed{Jobs: jobList(old0, old1), ServiceExists: true}, at(2), time.Minute)
	if diff := cmp.Diff([]string{"js-workers-0", "js-workers-1"}, names(p.DeleteJobs)); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
	if len(p.CreateJobs) != 0 {
		t.Errorf("created %v under names the old Jobs still hold", names(p.CreateJobs))
	}
	terminating := old0.DeepCopy()
	terminating.DeletionTimestamp = ptr.To(at(2))
	p = decidePure(t, js, Observed{Jobs: jobList(terminating), ServiceExists: true}, at(3), time.Minute)
	if diff := cmp.Diff([]string{"js-workers-1"}, names(p.CreateJobs)); diff != "" {
		t.Errorf("Recreate creates each Job once its predecessor is gone (-want +got):\n%s", diff)
	}
	for _, j := range p.CreateJobs {
		if j.Labels[jobset.RestartsKey] != "1" {
			t.Errorf("new job %s has restart attempt %s", j.Name, j.Labels[jobset.RestartsKey])
		}
	}
}

func TestDecideBlockingRecreateWaitsForEveryJobAndPod(t *testing.T) {
	js := testJobSet("workers", 2)
	js.Spec.FailurePolicy = &jobset.FailurePolicy{RestartStrategy: jobset.BlockingRecreate, MaxRestarts: 1}
	js.Status.Restarts = 1
	terminating := withAttempt(jobOf(js, "workers", 0), 0)
	terminating.DeletionTimestamp = ptr.To(at(0))
	oldPod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{jobset.RestartsKey: "0"}}}

	if p := decidePure(t, js, Observed{Jobs: jobList(terminating), ServiceExists: true}, at(1), time.Minute); len(p.CreateJobs) != 0 {
		t.Errorf("created %v while a Job of the previous attempt exists", names(p.CreateJobs))
	}
	if p := decidePure(t, js, Observed{Pods: []corev1.Pod{oldPod}, ServiceExists: true}, at(1), time.Minute); len(p.CreateJobs) != 0 {
		t.Errorf("created %v while a Pod of the previous attempt exists", names(p.CreateJobs))
	}
	if p := decidePure(t, js, Observed{ServiceExists: true}, at(1), time.Minute); len(p.CreateJobs) != 2 {
		t.Errorf("created %v once everything is gone, want 2 jobs", names(p.CreateJobs))
	}
}

func TestDecideRestartJobReplacesOnlyThatJob(t *testing.T) {
	js := testJobSet("workers", 3)
	js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 2, Rules: []jobset.FailurePolicyRule{{Name: "one", Action: jobset.RestartJob}}}
	jobs := []*batchv1.Job{jobOf(js, "workers", 0), failedJob(jobOf(js, "workers", 1), "BackoffLimitExceeded", "", at(0)), jobOf(js, "workers", 2)}

	p := decidePure(t, js, Observed{Jobs: jobList(jobs...), ServiceExists: true}, at(1), time.Minute)
	js.Status = p.Status
	p = decidePure(t, js, Observed{Jobs: jobList(jobs...), ServiceExists: true}, at(2), time.Minute)
	if diff := cmp.Diff([]string{"js-workers-1"}, names(p.DeleteJobs)); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
	if p.Status.Restarts != 0 {
		t.Errorf("a Job restart counted as a JobSet restart")
	}
	replacement := jobOf(js, "workers", 1)
	if replacement.Labels[jobset.JobRestartAttemptKey] != "1" {
		t.Errorf("replacement job-restart-attempt = %s, want 1", replacement.Labels[jobset.JobRestartAttemptKey])
	}
}

func TestDecideDeletesAFailedJobWithAnIndexOutOfRange(t *testing.T) {
	js := testJobSet("workers", 3)
	js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 2, Rules: []jobset.FailurePolicyRule{{Name: "one", Action: jobset.RestartJob}}}
	bad := failedJob(jobOf(js, "workers", 1), "BackoffLimitExceeded", "", at(0))
	// Not an index of the replicated job (a label edited by hand): one
	// that is not a number makes the Job one of no attempt, deleted.
	bad.Labels[jobset.JobIndexKey] = "7"
	jobs := []*batchv1.Job{jobOf(js, "workers", 0), bad, jobOf(js, "workers", 2)}

	// It used to index past the restart counters and crash the reconcile.
	p := decidePure(t, js, Observed{Jobs: jobList(jobs...), ServiceExists: true}, at(1), time.Minute)
	if len(p.Events) != 0 {
		t.Errorf("decision Events %+v for a Job that is none of the JobSet's", p.Events)
	}
	for _, rs := range p.Status.ReplicatedJobsStatus {
		if len(rs.JobRestarts) != 0 {
			t.Errorf("job restarts %v after a Job with no valid index failed", rs.JobRestarts)
		}
	}
	if diff := cmp.Diff([]string{bad.Name}, names(p.DeleteJobs)); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
	// restartJob itself refuses it, should it ever be asked.
	if err := restartJob(js, &p.Status, bad, true); err == nil || !strings.Contains(err.Error(), `"7"`) {
		t.Errorf("restartJob of index 7 of 3 replicas: %v", err)
	}
}

func TestDecideWarnsOfInPlaceJobsWithCompletionsOtherThanParallelism(t *testing.T) {
	js := inPlaceJobSet(0, 0)
	js.Spec.ReplicatedJobs[1].Template.Spec.Parallelism = ptr.To[int32](2)
	js.Spec.ReplicatedJobs[1].Template.Spec.Completions = ptr.To[int32](1)
	p := decidePure(t, js, Observed{Jobs: jobList(readyJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0))), ServiceExists: true}, at(0), time.Minute)
	if len(p.Warnings) != 1 || p.Warnings[0].Reason != ReasonInvalidInPlaceRestartJobs || !strings.Contains(p.Warnings[0].Message, "replicated job workers: completions 1, parallelism 2") {
		t.Errorf("warnings %+v", p.Warnings)
	}
	if got := expectedPods(js); got != 2+1 {
		t.Errorf("expected Pods %d, want 3: a Job runs min(parallelism, completions) Pods", got)
	}
}

func TestDecideSuspendAndResumeInOrder(t *testing.T) {
	js := testJobSet("driver", 1, "workers", 1)
	js.Spec.StartupPolicy.StartupPolicyOrder = jobset.InOrder
	js.Spec.Suspend = ptr.To(true)

	p := decidePure(t, js, Observed{ServiceExists: true}, at(0), time.Minute)
	if len(p.CreateJobs) != 2 || !*p.CreateJobs[0].Spec.Suspend || !*p.CreateJobs[1].Spec.Suspend {
		t.Fatalf("while suspended every Job is created suspended, got %v", names(p.CreateJobs))
	}
	if c := findCondition(&p.Status, jobset.JobSetSuspended); c == nil || c.Status != "True" {
		t.Errorf("suspended condition %+v", c)
	}

	js.Status = p.Status
	js.Spec.Suspend = ptr.To(false)
	driver, workers := buildJob(js, 0, 0, true, nil), buildJob(js, 1, 0, true, nil)
	p = decidePure(t, js, Observed{Jobs: jobList(driver, workers), ServiceExists: true}, at(1), time.Minute)
	if diff := cmp.Diff([]string{"js-driver-0"}, updatedNames(p.ResumeJobs)); diff != "" {
		t.Errorf("first resume (-want +got):\n%s", diff)
	}
	if c := findCondition(&p.Status, jobset.JobSetSuspended); c.Status != "False" || c.Reason != ReasonResumed {
		t.Errorf("suspended condition after resume %+v", c)
	}

	js.Status = p.Status
	driver.Spec.Suspend = ptr.To(false)
	readyJob(driver)
	p = decidePure(t, js, Observed{Jobs: jobList(driver, workers), ServiceExists: true}, at(2), time.Minute)
	if diff := cmp.Diff([]string{"js-workers-0"}, updatedNames(p.ResumeJobs)); diff != "" {
		t.Errorf("second resume (-want +got):\n%s", diff)
	}
}

func TestDecideFinished(t *testing.T) {
	js := testJobSet("workers", 2)
	js.Spec.TTLSecondsAfterFinished = ptr.To[int32](60)
	done := succeededJob(jobOf(js, "workers", 0))
	running := jobOf(js, "workers", 1)

	p := decidePure(t, js, Observed{Jobs: jobList(done, succeededJob(jobOf(js, "workers", 1)))}, at(0), time.Minute)
	if p.Status.TerminalState != jobset.TerminalStateCompleted {
		t.Fatalf("terminal state %q", p.Status.TerminalState)
	}
	js.Status = p.Status
	js.Status.Conditions[0].LastTransitionTime = at(0)

	p = decidePure(t, js, Observed{Jobs: jobList(done, running)}, at(30), time.Minute)
	if diff := cmp.Diff([]string{"js-workers-1"}, names(p.DeleteJobs)); diff != "" {
		t.Errorf("a finished JobSet deletes its active Jobs (-want +got):\n%s", diff)
	}
	if p.DeleteJobSet || p.RequeueAfter != 30*time.Second {
		t.Errorf("before expiry: delete=%v requeue=%s", p.DeleteJobSet, p.RequeueAfter)
	}
	if p = decidePure(t, js, Observed{}, at(60), time.Minute); !p.DeleteJobSet {
		t.Errorf("at expiry the JobSet is not deleted")
	}
}

// decide is pure: restarting one Job writes the new counters into the plan's
// status, never through the JobSet's own status slices.
func TestDecideDoesNotChangeItsInput(t *testing.T) {
	js := testJobSet("workers", 3)
	js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 5, Rules: []jobset.FailurePolicyRule{{Name: "one", Action: jobset.RestartJob}}}
	js.Status.ReplicatedJobsStatus = []jobset.ReplicatedJobStatus{
		{Name: "workers", JobRestarts: []int32{0, 0, 0}, JobRestartsCountTowardsMax: []int32{0, 0, 0}},
	}
	jobs := jobList(jobOf(js, "workers", 0), jobOf(js, "workers", 1), failedJob(jobOf(js, "workers", 2), "BackoffLimitExceeded", "", at(0)))
	p := decidePure(t, js, Observed{Jobs: jobs, ServiceExists: true}, at(1), time.Minute)
	want := []jobset.ReplicatedJobStatus{{Name: "workers", JobRestarts: []int32{0, 0, 1}, JobRestartsCountTowardsMax: []int32{0, 0, 1}}}
	if diff := cmp.Diff(want, p.Status.ReplicatedJobsStatus, cmpopts.IgnoreFields(jobset.ReplicatedJobStatus{}, "Ready", "Active", "Failed", "Succeeded", "Suspended")); diff != "" {
		t.Errorf("planned replicated job status (-want +got):\n%s", diff)
	}
}

// An InPlaceRestart JobSet with in-place restarts off has no barriers to
// hold an InOrder startup: its Jobs are created in order, as any other
// JobSet's.
func TestDecideStartupInOrderWithInPlaceRestartsOff(t *testing.T) {
	js := testJobSet("queue", 1, "driver", 2)
	js.Spec.StartupPolicy.StartupPolicyOrder = jobset.InOrder
	js.Spec.FailurePolicy = &jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart}
	js.Annotations = map[string]string{jobset.DisableInPlaceRestartKey: "true"}
	p := decidePure(t, js, Observed{ServiceExists: true}, at(0), time.Minute)
	if diff := cmp.Diff([]string{"js-queue-0"}, names(p.CreateJobs)); diff != "" {
		t.Errorf("first wave (-want +got):\n%s", diff)
	}
}

func TestDecideDoesNotCreateAJobTheCacheHasNotShownYet(t *testing.T) {
	js := testJobSet("driver", 1, "workers", 2)
	first := decidePure(t, js, Observed{}, at(0), time.Minute)
	js.Status = first.Status
	// The cache shows only the driver's Job; the workers' were created.
	p := decidePure(t, js, Observed{Jobs: jobList(first.CreateJobs[0]), ServiceExists: true,
		Creating: map[string]bool{"js-workers-0": true, "js-workers-1": true}}, at(1), time.Minute)
	if len(p.CreateJobs) != 0 {
		t.Errorf("created again: %v", names(p.CreateJobs))
	}
}

func TestDecideDoesNotDeleteAgainAJobWhoseDeletionTheCacheHasNotShownYet(t *testing.T) {
	js := testJobSet("workers", 2)
	js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 3}
	old0, old1 := jobOf(js, "workers", 0), failedJob(jobOf(js, "workers", 1), "BackoffLimitExceeded", "", at(0))
	old0.UID, old1.UID = "uid-0", "uid-1"
	p := decidePure(t, js, Observed{Jobs: jobList(old0, old1), ServiceExists: true}, at(1), time.Minute)
	js.Status = p.Status

	obs := Observed{Jobs: jobList(old0, old1), ServiceExists: true, Deleting: map[types.UID]bool{old0.UID: true}}
	p = decidePure(t, js, obs, at(2), time.Minute)
	if diff := cmp.Diff([]string{old1.Name}, names(p.DeleteJobs)); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
	if len(p.CreateJobs) != 0 {
		t.Errorf("created %v under a name a Job being deleted holds", names(p.CreateJobs))
	}
}

// Every decision that needs the JobSet reconciled again asks through
// requeueWithin, so that the soonest of them wins whatever their order.
func TestRequeueWithin(t *testing.T) {
	for name, tc := range map[string]struct {
		// setup
		asked  time.Duration
		within time.Duration
		// want
		want time.Duration
	}{
		"nothing asked yet: d":       {asked: 0, within: 5 * time.Second, want: 5 * time.Second},
		"sooner than asked: d":       {asked: 10 * time.Second, within: 5 * time.Second, want: 5 * time.Second},
		"later than asked: kept":     {asked: 5 * time.Second, within: 10 * time.Second, want: 5 * time.Second},
		"as asked: kept":             {asked: 5 * time.Second, within: 5 * time.Second, want: 5 * time.Second},
		"zero asks for nothing":      {asked: 5 * time.Second, within: 0, want: 5 * time.Second},
		"a wait over asks nothing":   {asked: 0, within: -time.Second, want: 0},
		"a wait over keeps a sooner": {asked: 5 * time.Second, within: -time.Second, want: 5 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			p := Plan{RequeueAfter: tc.asked}
			p.RequeueWithin(tc.within)
			if diff := cmp.Diff(tc.want, p.RequeueAfter); diff != "" {
				t.Errorf("RequeueAfter (-want +got):\n%s", diff)
			}
		})
	}
}
