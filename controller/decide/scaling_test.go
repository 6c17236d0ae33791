package decide

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/state"
)

// scaleTo sets a replicated job's parallelism and completions, as an
// admitted update does.
func scaleTo(js *jobset.JobSet, rj int, n int32) {
	js.Spec.ReplicatedJobs[rj].Template.Spec.Parallelism = ptr.To(n)
	js.Spec.ReplicatedJobs[rj].Template.Spec.Completions = ptr.To(n)
}

func TestJobsToScale(t *testing.T) {
	cases := map[string]struct {
		edit func(js *jobset.JobSet)
		// jobs are built from the JobSet before the edit.
		jobs func(js *jobset.JobSet) []*batchv1.Job
		want []string
	}{
		"active and suspended Jobs of the current attempt follow the template": {
			edit: func(js *jobset.JobSet) { scaleTo(js, 1, 4) },
			jobs: func(js *jobset.JobSet) []*batchv1.Job {
				suspended := jobOf(js, "workers", 1)
				suspended.Spec.Suspend = ptr.To(true)
				return []*batchv1.Job{jobOf(js, "driver", 0), readyJob(jobOf(js, "workers", 0)), suspended}
			},
			want: []string{"js-workers-0 2→4", "js-workers-1 2→4"},
		},
		"Jobs at the template's size, finished ones and earlier attempts are left alone": {
			edit: func(js *jobset.JobSet) { scaleTo(js, 1, 4) },
			jobs: func(js *jobset.JobSet) []*batchv1.Job {
				scaled := js.DeepCopy()
				scaleTo(scaled, 1, 4)
				return []*batchv1.Job{
					jobOf(scaled, "workers", 0), // created after the scale: 4/4
					succeededJob(jobOf(js, "workers", 1)),
					withAttempt(jobOf(js, "workers", 2), 7),
				}
			},
		},
		"a template with completions other than parallelism is not scaled to": {
			edit: func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[1].Template.Spec.Parallelism = ptr.To[int32](4) },
			jobs: func(js *jobset.JobSet) []*batchv1.Job { return []*batchv1.Job{jobOf(js, "workers", 0)} },
		},
		"NonIndexed Jobs cannot change completions: not scaled": {
			edit: func(js *jobset.JobSet) {
				scaleTo(js, 1, 4)
				js.Spec.ReplicatedJobs[1].Template.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
			},
			jobs: func(js *jobset.JobSet) []*batchv1.Job { return []*batchv1.Job{jobOf(js, "workers", 0)} },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			js := testJobSet("driver", 1, "workers", 3)
			before := js.DeepCopy()
			tc.edit(js)
			c := state.ClassifyJobs(state.FamilyOf(js, jobList(tc.jobs(before)...), nil), nil, nil)
			var got []string
			for _, s := range jobsToScale(js, c) {
				got = append(got, fmt.Sprintf("%s %d→%d", s.Job.Name, s.from, s.To))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Jobs to scale (-want +got):\n%s", diff)
			}
		})
	}
}

func TestScaledEventsOnePerReplicatedJobAndSize(t *testing.T) {
	job := func(name string) *batchv1.Job { return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	got := ScaledEvents([]JobScale{
		{Job: job("js-w-0"), replicatedJob: "w", from: 2, To: 4},
		{Job: job("js-w-1"), replicatedJob: "w", from: 2, To: 4},
		{Job: job("js-d-0"), replicatedJob: "d", from: 1, To: 3},
	})
	want := []Event{
		{corev1.EventTypeNormal, ReasonReplicatedJobScaled, "replicated job w scaled from 2 to 4 Pods per Job (parallelism and completions of Jobs js-w-0, js-w-1)"},
		{corev1.EventTypeNormal, ReasonReplicatedJobScaled, "replicated job d scaled from 1 to 3 Pods per Job (parallelism and completions of Jobs js-d-0)"},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(Event{})); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// A scale of a synced InPlaceRestart group restarts it in place at its new
// size, and counts nowhere: nothing failed.
func TestDecideInPlaceScaleRestartsTheGroupUncounted(t *testing.T) {
	js := inPlaceJobSet(0, 0)
	jobs := jobList(readyJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0)))
	podsAt := func(epoch string, workers int) []corev1.Pod {
		out := []corev1.Pod{epochPod("d0", "driver", epoch, false), epochPod("d1", "driver", epoch, false)}
		for i := range workers {
			out = append(out, epochPod(fmt.Sprintf("w%d", i), "workers", epoch, false))
		}
		return out
	}

	// First sync at 4 Pods records the group's size.
	p := decidePure(t, js, Observed{Jobs: jobs, Pods: podsAt("1", 2), ServiceExists: true}, at(0), time.Minute)
	if p.Status.SyncedEpoch != 1 || p.Status.SyncedPods != 4 {
		t.Fatalf("first sync: epoch %d, pods %d; want 1 and 4", p.Status.SyncedEpoch, p.Status.SyncedPods)
	}

	// workers scaled 2→4: the Job is patched and the group restarts.
	js.Status = p.Status
	scaleTo(js, 1, 4)
	p = decidePure(t, js, Observed{Jobs: jobs, Pods: podsAt("1", 2), ServiceExists: true, Broadcast: p.Broadcast}, at(1), time.Minute)
	if len(p.ScaleJobs) != 1 || p.ScaleJobs[0].Job.Name != "js-workers-0" || p.ScaleJobs[0].To != 4 {
		t.Errorf("scale %+v, want js-workers-0 to 4", p.ScaleJobs)
	}
	if p.Status.DeprecatedEpoch != 1 || p.Status.Restarts != 0 || p.Status.InPlaceRestarts != 0 || p.Status.RestartsCountTowardsMax != 0 {
		t.Errorf("after the scale: deprecated %d, restarts %d/%d/%d; want 1 and nothing counted",
			p.Status.DeprecatedEpoch, p.Status.Restarts, p.Status.InPlaceRestarts, p.Status.RestartsCountTowardsMax)
	}
	c := findCondition(&p.Status, jobset.JobSetRestarting)
	if c == nil || c.Reason != ReasonInPlaceScale || !strings.Contains(c.Message, "scaled from 4 to 6 Pods") || !strings.Contains(c.Message, "not counted towards maxRestarts") {
		t.Errorf("restarting condition %+v", c)
	}
	if len(p.Events) != 1 || p.Events[0].Reason != ReasonInPlaceScale {
		t.Errorf("events %+v", p.Events)
	}
	if p.Broadcast["deprecatedEpoch"] != "1" {
		t.Errorf("broadcast %v", p.Broadcast)
	}

	// The new Pods' agents and the survivors report 2: synced at 6 Pods.
	js.Status = p.Status
	scaledJobs := jobList(readyJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0)))
	p = decidePure(t, js, Observed{Jobs: scaledJobs, Pods: podsAt("2", 3), ServiceExists: true, Broadcast: p.Broadcast}, at(2), time.Minute)
	if p.Status.SyncedEpoch != 1 {
		t.Errorf("synced %d with 5 of 6 Pods", p.Status.SyncedEpoch)
	}
	p = decidePure(t, js, Observed{Jobs: scaledJobs, Pods: podsAt("2", 4), ServiceExists: true, Broadcast: p.Broadcast}, at(3), time.Minute)
	if p.Status.SyncedEpoch != 2 || p.Status.SyncedPods != 6 || p.Status.Restarts != 0 {
		t.Errorf("after the scale: synced %d, pods %d, restarts %d; want 2, 6, 0", p.Status.SyncedEpoch, p.Status.SyncedPods, p.Status.Restarts)
	}
	if c := findCondition(&p.Status, jobset.JobSetRestarting); c.Status != metav1.ConditionFalse || c.Reason != ReasonInPlaceRestartDone || !strings.Contains(c.Message, "(6 Pods)") {
		t.Errorf("restarting condition after the sync %+v", c)
	}
	if len(p.ScaleJobs) != 0 {
		t.Errorf("scaled again: %+v", p.ScaleJobs)
	}

	// Scaled back 4→2: the dropped Pods are deleted by their Job; the group
	// restarts and syncs at 4 Pods once they are gone.
	js.Status = p.Status
	scaleTo(js, 1, 2)
	p = decidePure(t, js, Observed{Jobs: scaledJobs, Pods: podsAt("2", 4), ServiceExists: true, Broadcast: p.Broadcast}, at(4), time.Minute)
	if len(p.ScaleJobs) != 1 || p.ScaleJobs[0].from != 4 || p.ScaleJobs[0].To != 2 || p.Status.DeprecatedEpoch != 2 {
		t.Errorf("scale down: scale %+v, deprecated %d", p.ScaleJobs, p.Status.DeprecatedEpoch)
	}
	js.Status = p.Status
	leaving := podsAt("3", 4)
	for i := 4; i < 6; i++ {
		leaving[i].DeletionTimestamp = &metav1.Time{Time: t0.Time}
	}
	p = decidePure(t, js, Observed{Jobs: jobs, Pods: leaving, ServiceExists: true, Broadcast: p.Broadcast}, at(5), time.Minute)
	if p.Status.SyncedEpoch != 3 || p.Status.SyncedPods != 4 || p.Status.RestartsCountTowardsMax != 0 {
		t.Errorf("after the scale down: synced %d, pods %d, counted %d; want 3, 4, 0", p.Status.SyncedEpoch, p.Status.SyncedPods, p.Status.RestartsCountTowardsMax)
	}
}

// A failure after a scale's sync is an ordinary in-place restart, counted.
func TestDecideInPlaceFailureAfterAScaleIsCounted(t *testing.T) {
	js := inPlaceJobSet(1, 2)
	scaleTo(js, 1, 4)
	js.Status.SyncedPods = 6
	jobs := jobList(readyJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0)))
	var pods []corev1.Pod
	for i, rj := range []string{"driver", "driver", "workers", "workers", "workers", "workers"} {
		pods = append(pods, epochPod(fmt.Sprintf("p%d", i), rj, "2", i == 5))
	}
	p := decidePure(t, js, Observed{Jobs: jobs, Pods: pods, ServiceExists: true}, at(0), time.Minute)
	if p.Status.RestartsCountTowardsMax != 1 || len(p.ScaleJobs) != 0 {
		t.Errorf("counted %d, scale %+v; want 1 and none", p.Status.RestartsCountTowardsMax, p.ScaleJobs)
	}
	if c := findCondition(&p.Status, jobset.JobSetRestarting); c == nil || c.Reason != ReasonInPlaceRestart {
		t.Errorf("restarting condition %+v", c)
	}
}
