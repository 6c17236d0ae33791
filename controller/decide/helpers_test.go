package decide

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/internal/testutil"
	"github.com/inplace-dev/inplace/controller/state"
)

// The builders the tests share with those of other packages
// (controller/internal/testutil), under the names these tests use.
var (
	t0            = testutil.T0
	testJobSet    = testutil.JobSet
	inPlaceJobSet = testutil.InPlaceJobSet
	failJobOn     = testutil.FailJobOn
	names         = testutil.Names
)

var ignoreCondTime = cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")

func at(seconds int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(seconds) * time.Second)) }

// jobOf builds the current-attempt Job at index of replicated Job rj.
func jobOf(js *jobset.JobSet, rj string, index int) *batchv1.Job {
	for i := range js.Spec.ReplicatedJobs {
		if js.Spec.ReplicatedJobs[i].Name == rj {
			return buildJob(js, i, index, false, nil)
		}
	}
	panic("no replicated job " + rj)
}

func failedJob(job *batchv1.Job, reason, message string, when metav1.Time) *batchv1.Job {
	job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{
		Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: reason, Message: message, LastTransitionTime: when,
	})
	return job
}

func succeededJob(job *batchv1.Job) *batchv1.Job {
	job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue})
	job.Status.Succeeded = *job.Spec.Completions
	return job
}

func readyJob(job *batchv1.Job) *batchv1.Job {
	job.Status.Active = *job.Spec.Parallelism
	job.Status.Ready = job.Spec.Parallelism
	return job
}

func withAttempt(job *batchv1.Job, attempt int) *batchv1.Job {
	job.Labels[jobset.RestartsKey] = strconv.Itoa(attempt)
	return job
}

func jobList(jobs ...*batchv1.Job) []batchv1.Job {
	out := make([]batchv1.Job, len(jobs))
	for i, j := range jobs {
		out[i] = *j
	}
	return out
}

// decidePure calls decide and fails the test if decide changed its inputs:
// the decision step must be a function of what it is given.
func decidePure(t *testing.T, js *jobset.JobSet, obs Observed, now metav1.Time, inPlaceTimeout time.Duration) Plan {
	t.Helper()
	jsBefore := js.DeepCopy()
	obsBefore := copyObserved(obs)
	p := Decide(js, obs, now, Timeouts{InPlaceRestart: inPlaceTimeout, FatalExitSettle: DefaultFatalExitSettle})
	if diff := cmp.Diff(jsBefore, js); diff != "" {
		t.Errorf("decide changed the JobSet it was given (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(obsBefore, obs, cmp.AllowUnexported(Observed{})); diff != "" {
		t.Errorf("decide changed what was observed (-before +after):\n%s", diff)
	}
	// Every decision of every test moves the JobSet only by applying rows
	// of the table of transitions, each from where the one before left
	// it, and lands where the last says; or it does not move at all. It
	// counts a restart only on a row that says it may.
	// The status upstream JobSet left is carried over before any move
	// (adoptUpstream): the restarts it counts were made before.
	adopted, _ := adoptUpstream(js)
	from, to := jobset.RestartStateOf(adopted, &adopted.Status), jobset.RestartStateOf(js, &p.Status)
	counted := countedRestarts(&p.Status) > countedRestarts(&adopted.Status)
	if err := checkMoves(from, to, counted, p.moves); err != nil {
		t.Error(err)
	}
	return p
}

func copyObserved(o Observed) Observed {
	c := o
	c.Jobs = nil
	for i := range o.Jobs {
		c.Jobs = append(c.Jobs, *o.Jobs[i].DeepCopy())
	}
	c.Pods = nil
	for i := range o.Pods {
		c.Pods = append(c.Pods, *o.Pods[i].DeepCopy())
	}
	c.Broadcast = maps.Clone(o.Broadcast)
	c.Creating = maps.Clone(o.Creating)
	c.Claims = maps.Clone(o.Claims)
	return c
}

func updatedNames(updates []JobUpdate) []string {
	var out []string
	for _, u := range updates {
		out = append(out, u.Cached.Name)
	}
	return out
}

// checkMoves says what is wrong with the rows a decision applied (moves)
// to move a JobSet from one state to another, counting a restart or not.
func checkMoves(from, to jobset.RestartState, counted bool, moves []row) error {
	if len(moves) == 0 {
		if from != to {
			return fmt.Errorf("decide moved the JobSet from %s to %s without applying a row of the table of transitions", from, to)
		}
		if counted {
			return fmt.Errorf("decide counted a restart in %s without applying a row of the table of transitions", from)
		}
		return nil
	}
	at, mayCount, applied := []jobset.RestartState{from}, false, []string{}
	for _, r := range moves {
		t := transitions[r]
		applied = append(applied, t.name)
		possible := slices.DeleteFunc(slices.Clone(at), func(s jobset.RestartState) bool { return !slices.Contains(t.from, s) })
		if len(possible) == 0 {
			return fmt.Errorf("decide applied %q to a JobSet in %v (rows %q), a row that moves from %v only", t.name, at, applied, t.from)
		}
		at = possible
		if t.to != nil {
			at = t.to
		}
		mayCount = mayCount || t.counted
	}
	if !slices.Contains(at, to) {
		return fmt.Errorf("decide moved the JobSet from %s to %s applying %q, whose last lands in %v", from, to, applied, at)
	}
	if counted && !mayCount {
		return fmt.Errorf("decide counted a restart moving from %s to %s applying %q, rows that count none", from, to, applied)
	}
	return nil
}

// observePodIn is what PodGroups finds of one Pod of js: its epoch facts,
// bounded by js's status, and for a suspect Pod what its Job's
// podFailurePolicy makes of it.
func observePodIn(js *jobset.JobSet, pod *corev1.Pod) state.PodEpoch {
	family := state.FamilyOf(js, nil, []corev1.Pod{*pod})
	p := family.PodGroups(js, pod.Labels[jobset.RestartsKey])[0].PodEpoch
	p.Name = pod.Name // the Pod's group has its name, its class none
	return p
}
