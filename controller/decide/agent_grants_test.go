package decide

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// The Jobs of a new InPlaceRestart JobSet wait for its agents' grants, for
// at most AgentGrantWait from its creation or the controller's start,
// whichever is later, and are created past it with a Warning; nothing
// else of the plan waits.
func TestAgentGrantWait(t *testing.T) {
	created := func(js *jobset.JobSet, at metav1.Time) *jobset.JobSet {
		js.CreationTimestamp = at
		return js
	}
	all := []string{"js-driver-0", "js-workers-0"}

	// An in-place restart under way since at(0), its deadline at(60), and
	// the workers' Job gone meanwhile: to create again.
	restarting := inPlaceJobSet(0, 1)
	jobs := jobList(readyJob(jobOf(restarting, "driver", 0)), readyJob(jobOf(restarting, "workers", 0)))
	p := decidePure(t, restarting, Observed{Jobs: jobs, ServiceExists: true, Pods: []corev1.Pod{
		epochPod("a", "driver", "1", false), epochPod("b", "driver", "1", false), epochPod("c", "workers", "1", true), epochPod("d", "workers", "1", false)}}, at(0), time.Minute)
	restarting.Status = p.Status
	restartingObs := Observed{Jobs: jobs[:1], ServiceExists: true, Broadcast: p.Broadcast, AgentGrantsMissing: true, Pods: []corev1.Pod{
		epochPod("a", "driver", "2", false), epochPod("b", "driver", "2", false), epochPod("d", "workers", "2", false)}}

	type outcome struct {
		Create                   []string
		AwaitingAgentGrants      time.Duration
		RequeueAfter             time.Duration
		CreateWithoutAgentGrants bool
	}
	for name, tc := range map[string]struct {
		// setup
		js  *jobset.JobSet
		obs Observed
		now metav1.Time
		// want
		want outcome
	}{
		"grants there: the Jobs are created at once": {
			js:   created(inPlaceJobSet(0, 0), at(0)),
			now:  at(1),
			want: outcome{Create: all},
		},
		"grants missing: the Jobs wait, and the JobSet is reconciled when the wait ends": {
			js:   created(inPlaceJobSet(0, 0), at(0)),
			obs:  Observed{AgentGrantsMissing: true},
			now:  at(1),
			want: outcome{AwaitingAgentGrants: AgentGrantWait - time.Second, RequeueAfter: AgentGrantWait - time.Second},
		},
		"grants missing, the wait over: the Jobs are created, and the plan says so": {
			js:   created(inPlaceJobSet(0, 0), at(0)),
			obs:  Observed{AgentGrantsMissing: true},
			now:  metav1.NewTime(at(0).Add(AgentGrantWait)),
			want: outcome{Create: all, CreateWithoutAgentGrants: true},
		},
		"created before the controller started: waits from its start": {
			js:   created(inPlaceJobSet(0, 0), at(0)),
			obs:  Observed{AgentGrantsMissing: true, ControllerStarted: at(10).Time},
			now:  at(11),
			want: outcome{AwaitingAgentGrants: AgentGrantWait - time.Second, RequeueAfter: AgentGrantWait - time.Second},
		},
		"created ahead of the controller's clock: waits no longer than the bound": {
			js:   created(inPlaceJobSet(0, 0), at(100)),
			obs:  Observed{AgentGrantsMissing: true},
			now:  at(1),
			want: outcome{AwaitingAgentGrants: AgentGrantWait, RequeueAfter: AgentGrantWait},
		},
		"suspended: its Jobs run no Pod and wait for nothing": {
			js: func() *jobset.JobSet {
				js := created(inPlaceJobSet(0, 0), at(0))
				js.Spec.Suspend = ptr.To(true)
				return js
			}(),
			obs:  Observed{AgentGrantsMissing: true},
			now:  at(1),
			want: outcome{Create: all},
		},
		"in-place restarts off: no agent to wait for": {
			js: func() *jobset.JobSet {
				js := created(inPlaceJobSet(0, 0), at(0))
				js.Annotations = map[string]string{jobset.DisableInPlaceRestartKey: "true"}
				return js
			}(),
			obs:  Observed{AgentGrantsMissing: true},
			now:  at(1),
			want: outcome{Create: all},
		},
		"not InPlaceRestart: no agent to wait for": {
			js:   created(testJobSet("driver", 1, "workers", 1), at(0)),
			obs:  Observed{AgentGrantsMissing: true},
			now:  at(1),
			want: outcome{Create: all},
		},
		"nothing to create: nothing waits, nothing is said": {
			js: created(inPlaceJobSet(0, 0), at(0)),
			obs: func() Observed {
				js := inPlaceJobSet(0, 0)
				return Observed{Jobs: jobList(jobOf(js, "driver", 0), jobOf(js, "workers", 0)), ServiceExists: true, AgentGrantsMissing: true}
			}(),
			now:  at(1),
			want: outcome{},
		},
		"another decision's sooner requeue is kept": {
			js:   created(restarting.DeepCopy(), at(40)),
			obs:  restartingObs,
			now:  at(45),
			want: outcome{AwaitingAgentGrants: AgentGrantWait - 5*time.Second, RequeueAfter: 15 * time.Second},
		},
		"the grants' wait, sooner than another decision's, is kept": {
			js:   created(restarting.DeepCopy(), at(20)),
			obs:  restartingObs,
			now:  at(45),
			want: outcome{AwaitingAgentGrants: AgentGrantWait - 25*time.Second, RequeueAfter: AgentGrantWait - 25*time.Second},
		},
		"a restart under way, grants there: the Job is created, the deadline kept": {
			js: restarting.DeepCopy(),
			obs: func() Observed {
				o := restartingObs
				o.AgentGrantsMissing = false
				return o
			}(),
			now:  at(45),
			want: outcome{Create: []string{"js-workers-0"}, RequeueAfter: 15 * time.Second},
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := decidePure(t, tc.js, tc.obs, tc.now, time.Minute)
			got := outcome{Create: names(p.CreateJobs), AwaitingAgentGrants: p.AwaitingAgentGrants, RequeueAfter: p.RequeueAfter, CreateWithoutAgentGrants: p.CreateWithoutAgentGrants}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAgentGrantWaitLeft(t *testing.T) {
	for name, tc := range map[string]struct {
		// setup
		created, started, now metav1.Time
		// want
		left time.Duration
	}{
		"from the creation":                     {created: at(0), now: at(10), left: AgentGrantWait - 10*time.Second},
		"from the controller's start, if later": {created: at(0), started: at(5), now: at(10), left: AgentGrantWait - 5*time.Second},
		"from the creation, if later":           {created: at(5), started: at(0), now: at(10), left: AgentGrantWait - 5*time.Second},
		"created ahead of the clock: the bound": {created: at(60), now: at(10), left: AgentGrantWait},
		"over":                                  {created: at(0), now: at(45), left: AgentGrantWait - 45*time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			js := inPlaceJobSet(0, 0)
			js.CreationTimestamp = tc.created
			if got := AgentGrantWaitLeft(js, tc.started.Time, tc.now.Time); got != tc.left {
				t.Errorf("left %v, want %v", got, tc.left)
			}
		})
	}
}
