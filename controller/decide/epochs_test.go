package decide

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/controller/state"
)

func pods(epochs ...int32) []state.PodEpoch {
	var out []state.PodEpoch
	for i, e := range epochs {
		rj := "driver"
		if i >= 2 {
			rj = "workers"
		}
		out = append(out, state.PodEpoch{Name: "p" + string(rune('0'+i)), ReplicatedJob: rj, Epoch: e, Ready: true})
	}
	return out
}

// groupsOf makes each Pod a group of its own.
func groupsOf(pods []state.PodEpoch) []state.PodGroup {
	out := make([]state.PodGroup, 0, len(pods))
	for _, p := range pods {
		out = append(out, state.PodGroup{PodEpoch: p, Names: map[string]struct{}{p.Name: {}}})
	}
	return out
}

func TestDecideEpochs(t *testing.T) {
	cases := map[string]struct {
		deprecated, synced int32
		pods               []state.PodEpoch
		edit               func([]state.PodEpoch)
		wantDeprecated     int32
		wantSynced         int32
		wantRestart        string // substring of why; "" for no restart
	}{
		"first start, not every Pod reported: nothing": {
			pods: pods(1, 1, 1, 0), wantDeprecated: 0, wantSynced: 0,
		},
		"first start, every Pod at 1: synced": {
			pods: pods(1, 1, 1, 1), wantDeprecated: 0, wantSynced: 1,
		},
		"steady: nothing": {
			synced: 1, pods: pods(1, 1, 1, 1), wantDeprecated: 0, wantSynced: 1,
		},
		"a worker exits: the synced epoch is deprecated at once": {
			synced: 1, pods: pods(1, 1, 1, 1),
			edit:           func(p []state.PodEpoch) { p[2].WorkerExited = "trainer" },
			wantDeprecated: 1, wantSynced: 1, wantRestart: "container trainer of Pod p2 exited",
		},
		"a Pod is deleted: deprecated at once": {
			synced: 1, pods: pods(1, 1, 1, 1),
			edit:           func(p []state.PodEpoch) { p[0].Gone = true },
			wantDeprecated: 1, wantSynced: 1, wantRestart: "Pod p0 of epoch 1 failed or is being deleted",
		},
		"a Pod failed with an exit code that fails its Job: no restart, the failure policy decides": {
			synced: 1, pods: pods(1, 1, 1, 1),
			edit:           func(p []state.PodEpoch) { p[1].Gone, p[1].Fatal = true, true },
			wantDeprecated: 0, wantSynced: 1,
		},
		"a Pod is gone and not yet replaced: deprecated": {
			synced: 1, pods: pods(1, 1, 1),
			wantDeprecated: 1, wantSynced: 1, wantRestart: "3 of 4 Pods of epoch 1 remain",
		},
		"an agent came back at a new epoch: deprecated (the KEP's detection)": {
			synced: 1, pods: pods(1, 2, 1, 1),
			wantDeprecated: 1, wantSynced: 1, wantRestart: "the agent of Pod p1 moved to epoch 2",
		},
		"every agent at a new epoch before a restart was decided: one restart, synced": {
			synced: 1, pods: pods(2, 2, 2, 2),
			wantDeprecated: 1, wantSynced: 2, wantRestart: "every Pod restarted to epoch 2 while 1 was synced",
		},
		"during the restart, some agents at the new epoch: nothing new": {
			deprecated: 1, synced: 1, pods: pods(2, 2, 1, 1),
			wantDeprecated: 1, wantSynced: 1,
		},
		"every agent at the new epoch: synced, the restart is over": {
			deprecated: 1, synced: 1, pods: pods(2, 2, 2, 2),
			wantDeprecated: 1, wantSynced: 2,
		},
		"a replacement Pod joins at a newer epoch than some: those are deprecated": {
			deprecated: 1, synced: 1, pods: pods(2, 2, 2, 3),
			wantDeprecated: 2, wantSynced: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			js := inPlaceJobSet(tc.deprecated, tc.synced)
			p := tc.pods
			if tc.edit != nil {
				tc.edit(p)
			}
			d := decideEpochs(js, groupsOf(p))
			type epochs struct{ Deprecated, Synced int32 }
			if diff := cmp.Diff(epochs{tc.wantDeprecated, tc.wantSynced}, epochs{d.deprecated, d.synced}); diff != "" {
				t.Errorf("epochs (-want +got):\n%s", diff)
			}
			if (tc.wantRestart == "") == d.restartBegan || !strings.Contains(d.why, tc.wantRestart) {
				t.Errorf("restartBegan=%v why=%q, want a restart because %q", d.restartBegan, d.why, tc.wantRestart)
			}
		})
	}
}

func TestOpenBarriersInOrder(t *testing.T) {
	js := inPlaceJobSet(0, 1)
	js.Spec.StartupPolicy.StartupPolicyOrder = jobset.InOrder
	p := pods(1, 1, 1, 1)
	p[1].Ready = false
	if diff := cmp.Diff([]string{"driver"}, decideEpochs(js, groupsOf(p)).openReplicatedJobs); diff != "" {
		t.Errorf("driver not all ready: open barriers (-want +got):\n%s", diff)
	}
	p[1].Ready = true
	if diff := cmp.Diff([]string{"driver", "workers"}, decideEpochs(js, groupsOf(p)).openReplicatedJobs); diff != "" {
		t.Errorf("driver ready: open barriers (-want +got):\n%s", diff)
	}
	js.Spec.StartupPolicy.StartupPolicyOrder = jobset.AnyOrder
	if got := decideEpochs(js, groupsOf(p)).openReplicatedJobs; got != nil {
		t.Errorf("AnyOrder: open %v, want nil (all)", got)
	}
}

// In process scope a Pod's Ready condition survives the restart of its
// workers: only the supervisors' readiness at the synced epoch opens the
// next replicated job.
func TestOpenBarriersInOrderProcessScope(t *testing.T) {
	js := inPlaceJobSet(1, 2)
	js.Spec.StartupPolicy.StartupPolicyOrder = jobset.InOrder
	js.Annotations = map[string]string{protocol.RestartScopeAnnotation: protocol.RestartScopeProcess}
	p := pods(2, 2, 2, 2)
	for i := range p {
		p[i].ReadyEpoch = 1 // ready at the epoch before the restart
	}
	if diff := cmp.Diff([]string{"driver"}, decideEpochs(js, groupsOf(p)).openReplicatedJobs); diff != "" {
		t.Errorf("driver Ready from the previous epoch: open barriers (-want +got):\n%s", diff)
	}
	p[0].ReadyEpoch, p[1].ReadyEpoch = 2, 2
	if diff := cmp.Diff([]string{"driver", "workers"}, decideEpochs(js, groupsOf(p)).openReplicatedJobs); diff != "" {
		t.Errorf("driver ready at the synced epoch: open barriers (-want +got):\n%s", diff)
	}
}

func TestUpstreamAttemptsInStepWithEpochs(t *testing.T) {
	s := jobset.JobSetStatus{}
	inStepWithEpochs(&s)
	if s.PreviousInPlaceRestartAttempt != nil || s.CurrentInPlaceRestartAttempt != nil {
		t.Errorf("no epoch yet: attempts %v %v, want unset", s.PreviousInPlaceRestartAttempt, s.CurrentInPlaceRestartAttempt)
	}
	s = jobset.JobSetStatus{DeprecatedEpoch: 1, SyncedEpoch: 2}
	inStepWithEpochs(&s)
	if ptr.Deref(s.PreviousInPlaceRestartAttempt, -1) != 0 || ptr.Deref(s.CurrentInPlaceRestartAttempt, -1) != 1 {
		t.Errorf("deprecated 1, synced 2: previous %v current %v, want 0 and 1", s.PreviousInPlaceRestartAttempt, s.CurrentInPlaceRestartAttempt)
	}
}

func epochPod(name, rj string, epoch string, exited bool) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels:      map[string]string{jobset.ReplicatedJobNameKey: rj, jobset.RestartsKey: "0"},
		Annotations: map[string]string{jobset.EpochKey: epoch}}}
	if exited {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "trainer",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}
	}
	return p
}

func TestDecideInPlaceRestartCountsAndBroadcasts(t *testing.T) {
	js := inPlaceJobSet(0, 1)
	js.Spec.FailurePolicy.MaxRestarts = 1
	jobs := jobList(readyJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0)))
	pods := []corev1.Pod{epochPod("a", "driver", "1", false), epochPod("b", "driver", "1", false), epochPod("c", "workers", "1", true), epochPod("d", "workers", "1", false)}

	p := decidePure(t, js, Observed{Jobs: jobs, Pods: pods, ServiceExists: true}, at(0), time.Minute)
	if p.Status.Restarts != 1 || p.Status.InPlaceRestarts != 1 || p.Status.RestartsCountTowardsMax != 1 || p.Status.DeprecatedEpoch != 1 {
		t.Fatalf("status after a worker exit: %+v", p.Status)
	}
	if len(p.CreateJobs)+len(p.DeleteJobs) != 0 {
		t.Errorf("an in-place restart touched Jobs: create %v delete %v", names(p.CreateJobs), names(p.DeleteJobs))
	}
	if p.Broadcast["deprecatedEpoch"] != "1" || p.Broadcast["syncedEpoch"] != "1" {
		t.Errorf("broadcast %v", p.Broadcast)
	}
	if c := findCondition(&p.Status, jobset.JobSetRestarting); c == nil || c.Reason != ReasonInPlaceRestart || !strings.Contains(c.Message, "container trainer of Pod c exited") {
		t.Errorf("restarting condition %+v", c)
	}

	// Every agent restarted into epoch 2: synced, restart over, the Jobs'
	// attempt unchanged.
	js.Status = p.Status
	pods = []corev1.Pod{epochPod("a", "driver", "2", false), epochPod("b", "driver", "2", false), epochPod("c", "workers", "2", false), epochPod("d", "workers", "2", false)}
	p = decidePure(t, js, Observed{Jobs: jobs, Pods: pods, ServiceExists: true, Broadcast: p.Broadcast}, at(1), time.Minute)
	if p.Status.SyncedEpoch != 2 || len(p.CreateJobs)+len(p.DeleteJobs) != 0 {
		t.Errorf("after the restart: synced %d, create %v delete %v", p.Status.SyncedEpoch, names(p.CreateJobs), names(p.DeleteJobs))
	}
	if c := findCondition(&p.Status, jobset.JobSetRestarting); c.Status != "False" || c.Reason != ReasonInPlaceRestartDone {
		t.Errorf("restarting condition after sync %+v", c)
	}

	// maxRestarts 1 is used: the next failure fails the JobSet.
	js.Status = p.Status
	pods[3] = epochPod("d", "workers", "2", true)
	p = decidePure(t, js, Observed{Jobs: jobs, Pods: pods, ServiceExists: true, Broadcast: p.Broadcast}, at(2), time.Minute)
	if c := findCondition(&p.Status, jobset.JobSetFailed); c == nil || c.Reason != ReasonReachedMaxRestarts {
		t.Errorf("after maxRestarts: failed condition %+v", c)
	}
	if p.Status.InPlaceRestarts != 1 {
		t.Errorf("in-place restarts %d, want exactly 1", p.Status.InPlaceRestarts)
	}
}

func TestInPlaceRestartFallsBackToRecreateAfterTimeout(t *testing.T) {
	js := inPlaceJobSet(0, 1)
	jobs := jobList(readyJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0)))
	pods := []corev1.Pod{epochPod("a", "driver", "1", false), epochPod("b", "driver", "1", false), epochPod("c", "workers", "1", true), epochPod("d", "workers", "1", false)}
	p := decidePure(t, js, Observed{Jobs: jobs, Pods: pods, ServiceExists: true}, at(0), time.Minute)
	js.Status = p.Status

	// The restart hangs: one Pod never comes back.
	stuck := []corev1.Pod{epochPod("a", "driver", "2", false), epochPod("b", "driver", "2", false), epochPod("d", "workers", "2", false)}
	p = decidePure(t, js, Observed{Jobs: jobs, Pods: stuck, ServiceExists: true, Broadcast: p.Broadcast}, at(30), time.Minute)
	if p.Status.Restarts != 1 || p.RequeueAfter != 30*time.Second {
		t.Fatalf("before the timeout: restarts %d, requeue %s", p.Status.Restarts, p.RequeueAfter)
	}
	p = decidePure(t, js, Observed{Jobs: jobs, Pods: stuck, ServiceExists: true, Broadcast: p.Broadcast}, at(61), time.Minute)
	if p.Status.Restarts != 2 || p.Status.InPlaceRestarts != 1 || p.Status.RestartsCountTowardsMax != 1 {
		t.Errorf("after the timeout: restarts %d, in place %d, counted %d; want a recreation not counted again", p.Status.Restarts, p.Status.InPlaceRestarts, p.Status.RestartsCountTowardsMax)
	}
	if c := findCondition(&p.Status, jobset.JobSetRestarting); c.Reason != ReasonInPlaceRestartTimedOut || !strings.Contains(c.Message, "recreating every Job") {
		t.Errorf("condition %+v", c)
	}

	// The next reconcile recreates the Jobs.
	js.Status = p.Status
	p = decidePure(t, js, Observed{Jobs: jobs, Pods: stuck, ServiceExists: true}, at(62), time.Minute)
	if len(p.DeleteJobs) != 2 {
		t.Errorf("the fallback does not recreate the Jobs: delete %v", names(p.DeleteJobs))
	}
}

// A worker that exits with a code the podFailurePolicy makes FailJob is
// fatal while its Pod still runs (the real kubelet keeps the Pod Running as
// long as the agent sidecar does), so no in-place restart is decided for it.
func TestFatalExitOnARunningPodStartsNoRestart(t *testing.T) {
	js := inPlaceJobSet(0, 1)
	js.Spec.ReplicatedJobs[1].Template.Spec.PodFailurePolicy = failJobOn(3)
	pod := func(name, rj string, exit int32, reason string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{jobset.ReplicatedJobNameKey: rj}, Annotations: map[string]string{jobset.EpochKey: "1"}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
				Name: "c", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			}}},
		}
		if exit != 0 {
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Reason: reason}}
		}
		return p
	}
	for name, tc := range map[string]struct {
		exit           int32
		reason         string
		wantFatal      bool
		wantDeprecated int32
	}{
		"a fatal code: the failure policy decides, no restart": {exit: 3, wantFatal: true, wantDeprecated: 0},
		"another code: an in-place restart":                    {exit: 1, wantFatal: false, wantDeprecated: 1},
		// The kubelet's own stop for a restart of every container is not
		// the worker's exit.
		"stopped to restart all containers": {exit: 3, reason: "RestartingAllContainers", wantFatal: false, wantDeprecated: 1},
	} {
		t.Run(name, func(t *testing.T) {
			victim := observePodIn(js, pod("w0", "workers", tc.exit, tc.reason))
			if victim.Fatal != tc.wantFatal {
				t.Errorf("fatal = %v, want %v", victim.Fatal, tc.wantFatal)
			}
			d := decideEpochs(js, groupsOf([]state.PodEpoch{observePodIn(js, pod("d0", "driver", 0, "")), victim}))
			if d.deprecated != tc.wantDeprecated || d.restartBegan != (tc.wantDeprecated > 0) {
				t.Errorf("deprecated %d (restart began %v), want %d", d.deprecated, d.restartBegan, tc.wantDeprecated)
			}
		})
	}
}

func TestInvalidEpochIsReportedAndBlocksTheSync(t *testing.T) {
	js := inPlaceJobSet(0, 0)
	jobs := jobList(readyJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0)))
	pods := []corev1.Pod{epochPod("a", "driver", "1", false), epochPod("b", "driver", "1", false), epochPod("c", "workers", "1", false), epochPod("d", "workers", "one", false)}

	p := decidePure(t, js, Observed{Jobs: jobs, Pods: pods, ServiceExists: true}, at(0), time.Minute)
	if p.Status.SyncedEpoch != 0 {
		t.Errorf("synced epoch %d with a Pod whose epoch is not a number", p.Status.SyncedEpoch)
	}
	if len(p.Warnings) != 1 || p.Warnings[0].Reason != ReasonInvalidEpoch ||
		!strings.Contains(p.Warnings[0].Message, "Pod d") || !strings.Contains(p.Warnings[0].Message, `"one"`) {
		t.Errorf("warnings %+v, want one %s naming Pod d and its value", p.Warnings, ReasonInvalidEpoch)
	}
}

// An agent reports syncedEpoch + 1 at most; a higher epoch was written by
// something else (its worker shares its token) and would deprecate every
// epoch below it, the next one included, at every restart.
func TestEpochBeyondSyncedPlusOneIsInvalid(t *testing.T) {
	js := inPlaceJobSet(0, 1)
	jobs := jobList(readyJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0)))
	for name, tc := range map[string]struct {
		epochs      []string
		wantWarning bool
		wantSynced  int32
	}{
		"every Pod at syncedEpoch + 1: synced":    {epochs: []string{"2", "2", "2", "2"}, wantSynced: 2},
		"one Pod beyond syncedEpoch + 1: invalid": {epochs: []string{"2", "2", "2", "9"}, wantWarning: true, wantSynced: 1},
		"every Pod beyond: invalid, not synced":   {epochs: []string{"3", "3", "3", "3"}, wantWarning: true, wantSynced: 1},
		"the largest int32: invalid":              {epochs: []string{"2", "2", "2", "2147483647"}, wantWarning: true, wantSynced: 1},
	} {
		t.Run(name, func(t *testing.T) {
			var ps []corev1.Pod
			for i, e := range tc.epochs {
				rj := "driver"
				if i >= 2 {
					rj = "workers"
				}
				ps = append(ps, epochPod(string(rune('a'+i)), rj, e, false))
			}
			p := decidePure(t, js, Observed{Jobs: jobs, Pods: ps, ServiceExists: true}, at(0), time.Minute)
			if p.Status.SyncedEpoch != tc.wantSynced {
				t.Errorf("synced epoch %d, want %d", p.Status.SyncedEpoch, tc.wantSynced)
			}
			var warned []string
			for _, w := range p.Warnings {
				if w.Reason == ReasonInvalidEpoch {
					warned = append(warned, w.Message)
				}
			}
			if !tc.wantWarning {
				if len(warned) != 0 {
					t.Errorf("warnings %q, want none", warned)
				}
				return
			}
			last := tc.epochs[len(tc.epochs)-1]
			if len(warned) == 0 || !strings.Contains(warned[len(warned)-1], "Pod d") || !strings.Contains(warned[len(warned)-1], `"`+last+`"`) ||
				!strings.Contains(warned[len(warned)-1], "syncedEpoch + 1 (2)") {
				t.Errorf("warnings %q, want a %s naming Pod d, its value %q and the bound", warned, ReasonInvalidEpoch, last)
			}
		})
	}
}

func TestAgentCrashLoopBeforeTheFirstSyncFailsTheJobSet(t *testing.T) {
	js := inPlaceJobSet(0, 0)
	js.Spec.FailurePolicy.MaxRestarts = 2
	jobs := jobList(readyJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0)))
	withAgent := func(p corev1.Pod, restarts, sidecarRestarts int32) corev1.Pod {
		p.Spec.InitContainers = []corev1.Container{
			{Name: "agent", Env: []corev1.EnvVar{{Name: protocol.EnvRestartExitCode, Value: "88"}}},
			{Name: "log-shipper"},
		}
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "agent", RestartCount: restarts}, {Name: "log-shipper", RestartCount: sidecarRestarts}}
		return p
	}
	looping := func(restarts, sidecarRestarts int32, epoch string) []corev1.Pod {
		d := epochPod("d", "workers", epoch, false)
		if epoch == "" {
			delete(d.Annotations, jobset.EpochKey)
		}
		return []corev1.Pod{epochPod("a", "driver", epoch, false), epochPod("b", "driver", epoch, false), epochPod("c", "workers", epoch, false), withAgent(d, restarts, sidecarRestarts)}
	}

	// As many restarts as maxRestarts allows: the agent may still come up.
	p := decidePure(t, js, Observed{Jobs: jobs, Pods: looping(2, 0, ""), ServiceExists: true}, at(0), time.Minute)
	if p.Status.TerminalState != "" {
		t.Fatalf("failed at maxRestarts restarts of the agent: %+v", findCondition(&p.Status, jobset.JobSetFailed))
	}
	// Another sidecar's restarts are not the agent's.
	p = decidePure(t, js, Observed{Jobs: jobs, Pods: looping(0, 30, ""), ServiceExists: true}, at(0), time.Minute)
	if p.Status.TerminalState != "" {
		t.Fatalf("failed for another sidecar's restarts: %+v", findCondition(&p.Status, jobset.JobSetFailed))
	}
	// One more, before the group ever synced: a crash loop.
	p = decidePure(t, js, Observed{Jobs: jobs, Pods: looping(3, 0, ""), ServiceExists: true}, at(0), time.Minute)
	c := findCondition(&p.Status, jobset.JobSetFailed)
	if c == nil || c.Reason != ReasonReachedMaxRestarts || !strings.Contains(c.Message, "the agent of Pod d restarted 3 times") {
		t.Errorf("failed condition %+v, want %s naming the Pod", c, ReasonReachedMaxRestarts)
	}
	// Once the group synced, an agent that crashes alone resumes its
	// epoch: no bound, also with maxRestarts 0 and MaxInt32.
	for _, maxRestarts := range []int32{0, math.MaxInt32} {
		synced := inPlaceJobSet(0, 1)
		synced.Spec.FailurePolicy.MaxRestarts = maxRestarts
		p = decidePure(t, synced, Observed{Jobs: jobs, Pods: looping(5, 0, "1"), ServiceExists: true}, at(0), time.Minute)
		if p.Status.TerminalState != "" {
			t.Errorf("maxRestarts %d: an agent crash after the sync failed the JobSet: %+v", maxRestarts, findCondition(&p.Status, jobset.JobSetFailed))
		}
	}
}

// With upstream JobSet's disable-in-place-restart annotation, a worker exit
// decides nothing in place: no epoch deprecated, no restart counted, no
// timeout; the broadcast tells the agents to stand aside.
func TestDecideInPlaceDisabled(t *testing.T) {
	js := inPlaceJobSet(0, 1)
	js.Annotations = map[string]string{jobset.DisableInPlaceRestartKey: ""}
	jobs := jobList(readyJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0)))
	pods := []corev1.Pod{epochPod("a", "driver", "1", false), epochPod("b", "driver", "1", false), epochPod("c", "workers", "1", true), epochPod("d", "workers", "1", false)}
	p := decidePure(t, js, Observed{Jobs: jobs, Pods: pods, ServiceExists: true}, at(0), time.Minute)
	if p.Status.Restarts != 0 || p.Status.InPlaceRestarts != 0 || p.Status.DeprecatedEpoch != 0 || p.Status.SyncedEpoch != 1 {
		t.Errorf("status after a worker exit: restarts %d in place %d deprecated %d synced %d, want 0 0 0 1",
			p.Status.Restarts, p.Status.InPlaceRestarts, p.Status.DeprecatedEpoch, p.Status.SyncedEpoch)
	}
	if p.Broadcast[protocol.KeyDisabled] != "true" || p.Broadcast[protocol.KeySyncedEpoch] != "1" {
		t.Errorf("broadcast %v, want the epochs as they are and disabled", p.Broadcast)
	}
	if c := findCondition(&p.Status, jobset.JobSetRestarting); c != nil {
		t.Errorf("restarting condition %+v", c)
	}
}

// The ranks of a training program fail together: one with a fatal code,
// its peers with 1 as their collective breaks, reported by their kubelets
// in any order. In a JobSet whose Jobs can fail by podFailurePolicy, a
// restart waits FatalExitSettle for a fatal exit to be reported, which
// then decides instead.
func TestRestartIsHeldForAFatalExitToBeReported(t *testing.T) {
	js := inPlaceJobSet(0, 1)
	js.Spec.ReplicatedJobs[1].Template.Spec.PodFailurePolicy = failJobOn(42)
	jobs := jobList(readyJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0)))
	echo := []corev1.Pod{epochPod("a", "driver", "1", false), epochPod("b", "driver", "1", false), epochPod("c", "workers", "1", true), epochPod("d", "workers", "1", false)}

	p := decidePure(t, js, Observed{Jobs: jobs, Pods: echo, ServiceExists: true}, at(0), time.Minute)
	if p.Status.Restarts != 0 || p.Status.DeprecatedEpoch != 0 || p.Broadcast["deprecatedEpoch"] != "0" {
		t.Fatalf("a restart began before the settle: restarts %d, deprecated %d, broadcast %v", p.Status.Restarts, p.Status.DeprecatedEpoch, p.Broadcast)
	}
	if !p.RestartHeldSince.Equal(at(0).Time) || p.RequeueAfter != DefaultFatalExitSettle {
		t.Fatalf("held since %v, requeue %v; want %v and %v", p.RestartHeldSince, p.RequeueAfter, at(0).Time, DefaultFatalExitSettle)
	}
	held := p.RestartHeldSince

	t.Run("the settle passes: the restart begins", func(t *testing.T) {
		p := decidePure(t, js, Observed{Jobs: jobs, Pods: echo, ServiceExists: true, RestartHeldSince: held}, at(1), time.Minute)
		if p.Status.Restarts != 0 || p.RequeueAfter != time.Second {
			t.Fatalf("one second in: restarts %d, requeue %v; want 0 and 1s", p.Status.Restarts, p.RequeueAfter)
		}
		p = decidePure(t, js, Observed{Jobs: jobs, Pods: echo, ServiceExists: true, RestartHeldSince: held}, at(2), time.Minute)
		if p.Status.Restarts != 1 || p.Status.InPlaceRestarts != 1 || p.Status.DeprecatedEpoch != 1 || !p.RestartHeldSince.IsZero() {
			t.Errorf("after the settle: restarts %d, in place %d, deprecated %d, held %v; want the restart begun", p.Status.Restarts, p.Status.InPlaceRestarts, p.Status.DeprecatedEpoch, p.RestartHeldSince)
		}
	})
	t.Run("a fatal exit is reported meanwhile: no restart", func(t *testing.T) {
		fatal := slices.Clone(echo)
		fatal[3] = epochPod("d", "workers", "1", true)
		fatal[3].Status.Phase = corev1.PodRunning
		fatal[3].Status.ContainerStatuses[0].State.Terminated.ExitCode = 42
		p := decidePure(t, js, Observed{Jobs: jobs, Pods: fatal, ServiceExists: true, RestartHeldSince: held}, at(1), time.Minute)
		if p.Status.Restarts != 0 || p.Status.DeprecatedEpoch != 0 || !p.RestartHeldSince.IsZero() {
			t.Errorf("restarts %d, deprecated %d, held %v: want no restart, nothing held", p.Status.Restarts, p.Status.DeprecatedEpoch, p.RestartHeldSince)
		}
	})
	t.Run("every Pod restarted meanwhile: one restart, counted, and done", func(t *testing.T) {
		restarted := []corev1.Pod{epochPod("a", "driver", "2", false), epochPod("b", "driver", "2", false), epochPod("c", "workers", "2", false), epochPod("d", "workers", "2", false)}
		p := decidePure(t, js, Observed{Jobs: jobs, Pods: restarted, ServiceExists: true, RestartHeldSince: held}, at(1), time.Minute)
		if p.Status.Restarts != 1 || p.Status.InPlaceRestarts != 1 || p.Status.SyncedEpoch != 2 || !p.RestartHeldSince.IsZero() {
			t.Errorf("restarts %d, in place %d, synced %d, held %v: want one restart, synced at 2", p.Status.Restarts, p.Status.InPlaceRestarts, p.Status.SyncedEpoch, p.RestartHeldSince)
		}
		if c := findCondition(&p.Status, jobset.JobSetRestarting); c == nil || c.Reason != ReasonInPlaceRestartDone {
			t.Errorf("restarting condition %+v, want %s", c, ReasonInPlaceRestartDone)
		}
	})
	t.Run("maxRestarts reached: the JobSet fails once the settle passed", func(t *testing.T) {
		js := js.DeepCopy()
		js.Spec.FailurePolicy.MaxRestarts = 0
		p := decidePure(t, js, Observed{Jobs: jobs, Pods: echo, ServiceExists: true}, at(0), time.Minute)
		if c := findCondition(&p.Status, jobset.JobSetFailed); c != nil || p.RestartHeldSince.IsZero() {
			t.Fatalf("failed condition %+v, held %v: want the restart held first", c, p.RestartHeldSince)
		}
		p = decidePure(t, js, Observed{Jobs: jobs, Pods: echo, ServiceExists: true, RestartHeldSince: p.RestartHeldSince}, at(2), time.Minute)
		if c := findCondition(&p.Status, jobset.JobSetFailed); c == nil || c.Reason != ReasonReachedMaxRestarts {
			t.Errorf("failed condition %+v, want %s", c, ReasonReachedMaxRestarts)
		}
	})
	t.Run("no rule fails a Job: the restart begins at once", func(t *testing.T) {
		js := js.DeepCopy()
		js.Spec.ReplicatedJobs[1].Template.Spec.PodFailurePolicy = nil
		p := decidePure(t, js, Observed{Jobs: jobs, Pods: echo, ServiceExists: true}, at(0), time.Minute)
		if p.Status.Restarts != 1 || !p.RestartHeldSince.IsZero() {
			t.Errorf("restarts %d, held %v: want the restart at once", p.Status.Restarts, p.RestartHeldSince)
		}
	})
}

// A restart every Pod made by itself is counted from what is left to see:
// the Pods at the new epoch. Why their predecessors stopped is gone with
// them, so a loss the podFailurePolicy would have ignored is counted too.
func TestRestartEveryPodMadeIsCountedTowardsMaxRestarts(t *testing.T) {
	js := inPlaceJobSet(0, 1)
	js.Spec.FailurePolicy.MaxRestarts = 1
	jobs := jobList(readyJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0)))
	restarted := []corev1.Pod{epochPod("a", "driver", "2", false), epochPod("b", "driver", "2", false), epochPod("c", "workers", "2", false), epochPod("d", "workers", "2", false)}
	p := decidePure(t, js, Observed{Jobs: jobs, Pods: restarted, ServiceExists: true}, at(0), time.Minute)
	if p.Status.RestartsCountTowardsMax != 1 || p.Status.SyncedEpoch != 2 {
		t.Errorf("counted %d, synced %d: want one counted restart and the new epoch synced", p.Status.RestartsCountTowardsMax, p.Status.SyncedEpoch)
	}
}

// With direct reports in process scope every exit, the fatal one first,
// reaches the controller from the agents: the restart is held only
// DirectFatalExitSettle, and a fatal code its agent reported, before the
// kubelet saw the container end, decides instead of a restart.
func TestDirectReportsHoldARestartBriefly(t *testing.T) {
	js := inPlaceJobSet(0, 1)
	js.Annotations = map[string]string{protocol.RestartScopeAnnotation: protocol.RestartScopeProcess}
	js.Spec.ReplicatedJobs[1].Template.Spec.PodFailurePolicy = failJobOn(42)
	jobs := jobList(readyJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0)))
	reported := func(name, rj string, exit *protocol.WorkerExit) corev1.Pod {
		p := epochPod(name, rj, "1", false)
		p.Annotations[protocol.ReportedMark] = "true"
		if exit != nil {
			p.Annotations[protocol.WorkerExitAnnotation] = protocol.FormatWorkerExit(*exit)
		}
		return p
	}
	echo := []corev1.Pod{reported("a", "driver", nil), reported("b", "driver", nil),
		reported("c", "workers", &protocol.WorkerExit{Epoch: 1, Container: "c", Code: 1}), reported("d", "workers", nil)}
	endpoint := protocol.ReportEndpoint{Address: "10.0.0.5:9445", ServerName: "s", CA: "ca", Session: "1"}

	p := decidePure(t, js, Observed{Jobs: jobs, Pods: echo, ServiceExists: true, ReportEndpoint: endpoint}, at(0), time.Minute)
	if p.Status.Restarts != 0 || p.RequeueAfter != DirectFatalExitSettle {
		t.Fatalf("restarts %d, requeue %v: want the restart held %v", p.Status.Restarts, p.RequeueAfter, DirectFatalExitSettle)
	}
	if p.Broadcast[protocol.KeyReportAddress] != endpoint.Address || p.Broadcast[protocol.KeyReportSession] != endpoint.Session {
		t.Errorf("broadcast %v does not name the endpoint", p.Broadcast)
	}
	t.Run("without direct reports, the kubelets' relists are waited for", func(t *testing.T) {
		p := decidePure(t, js, Observed{Jobs: jobs, Pods: echo, ServiceExists: true}, at(0), time.Minute)
		if p.RequeueAfter != DefaultFatalExitSettle {
			t.Errorf("requeue %v, want %v", p.RequeueAfter, DefaultFatalExitSettle)
		}
	})
	t.Run("an agent that writes its Pod may not say a fatal exit: the relists are waited for", func(t *testing.T) {
		older := slices.Clone(echo)
		older[1] = *echo[1].DeepCopy()
		delete(older[1].Annotations, protocol.ReportedMark)
		p := decidePure(t, js, Observed{Jobs: jobs, Pods: older, ServiceExists: true, ReportEndpoint: endpoint}, at(0), time.Minute)
		if p.RequeueAfter != DefaultFatalExitSettle {
			t.Errorf("requeue %v, want %v", p.RequeueAfter, DefaultFatalExitSettle)
		}
	})
	t.Run("a fatal code reported by its agent: no restart", func(t *testing.T) {
		fatal := slices.Clone(echo)
		fatal[3] = reported("d", "workers", &protocol.WorkerExit{Epoch: 1, Container: "c", Code: 42})
		p := decidePure(t, js, Observed{Jobs: jobs, Pods: fatal, ServiceExists: true, ReportEndpoint: endpoint, RestartHeldSince: at(0).Time}, metav1.NewTime(at(0).Add(100*time.Millisecond)), time.Minute)
		if p.Status.Restarts != 0 || p.Status.DeprecatedEpoch != 0 || !p.RestartHeldSince.IsZero() {
			t.Errorf("restarts %d, deprecated %d, held %v: want no restart, nothing held", p.Status.Restarts, p.Status.DeprecatedEpoch, p.RestartHeldSince)
		}
		if len(p.DeletePods) != 0 {
			t.Errorf("deleted %v on the agent's word alone", p.DeletePods)
		}
	})
	t.Run("the settle passes: the restart begins", func(t *testing.T) {
		p := decidePure(t, js, Observed{Jobs: jobs, Pods: echo, ServiceExists: true, ReportEndpoint: endpoint, RestartHeldSince: at(0).Time}, metav1.NewTime(at(0).Add(DirectFatalExitSettle)), time.Minute)
		if p.Status.Restarts != 1 || p.Status.DeprecatedEpoch != 1 {
			t.Errorf("restarts %d, deprecated %d: want the restart begun", p.Status.Restarts, p.Status.DeprecatedEpoch)
		}
	})
}

// A new leader knows nothing of the agents that report to it directly
// until they say their state again: for ReportGrace, a synced group whose
// Pods reported nothing to it has lost no member. Past it, or without
// direct reports, a Pod that says nothing is missing, as before.
func TestANewLeaderWaitsForTheAgentsToReportAgain(t *testing.T) {
	js := inPlaceJobSet(0, 1)
	js.Status.SyncedEpoch, js.Status.DeprecatedEpoch, js.Status.SyncedPods = 1, 0, 4
	jobs := jobList(readyJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0)))
	silent := func(name, rj string) corev1.Pod {
		p := epochPod(name, rj, "", false)
		delete(p.Annotations, jobset.EpochKey)
		p.Status.Phase = corev1.PodRunning
		return p
	}
	pods := []corev1.Pod{silent("a", "driver"), silent("b", "driver"), silent("c", "workers"), silent("d", "workers")}
	endpoint := protocol.ReportEndpoint{Address: "10.0.0.5:9445", ServerName: "s", CA: "ca", Session: "2"}
	started := at(0).Time

	for name, tc := range map[string]struct {
		obs         Observed
		now         metav1.Time
		wantRestart bool
	}{
		"just elected":                     {Observed{ReportEndpoint: endpoint, ReportsSettling: true, ReportsSince: started}, metav1.NewTime(started.Add(time.Second)), false},
		"elected, the endpoint not up yet": {Observed{ReportEndpoint: endpoint, ReportsSettling: true}, at(0), false},
		"the grace is over":                {Observed{ReportEndpoint: endpoint, ReportsSettling: true, ReportsSince: started}, metav1.NewTime(started.Add(ReportGrace)), true},
		"agents report on their Pods":      {Observed{}, at(0), true},
		// A leader without direct reports after one with them (disabled,
		// rolled back, or the JobSet opted out): its agents reported
		// elsewhere and have yet to write their Pods.
		"elected without direct reports, the broadcast naming the last leader's session": {Observed{ReportsSettling: true}, at(0), false},
		"elected without direct reports, the grace over":                                 {Observed{ReportsSettling: true, ReportsSince: started}, metav1.NewTime(started.Add(ReportGrace)), true},
	} {
		t.Run(name, func(t *testing.T) {
			obs := tc.obs
			obs.Jobs, obs.Pods, obs.ServiceExists = jobs, pods, true
			p := decidePure(t, js, obs, tc.now, time.Minute)
			if got := p.Status.Restarts == 1; got != tc.wantRestart {
				t.Errorf("restarted %v (restarts %d, deprecated %d), want %v", got, p.Status.Restarts, p.Status.DeprecatedEpoch, tc.wantRestart)
			}
		})
	}
	t.Run("an epoch an agent once wrote on its Pod is not taken for a lost member", func(t *testing.T) {
		js := js.DeepCopy()
		js.Status.SyncedEpoch, js.Status.DeprecatedEpoch = 3, 2
		stale := make([]corev1.Pod, len(pods))
		for i := range pods {
			stale[i] = *pods[i].DeepCopy()
			stale[i].Annotations = map[string]string{jobset.EpochKey: "2"}
		}
		p := decidePure(t, js, Observed{Jobs: jobs, Pods: stale, ServiceExists: true, ReportEndpoint: endpoint, ReportsSettling: true, ReportsSince: started}, metav1.NewTime(started.Add(time.Second)), time.Minute)
		if p.Status.Restarts != 0 {
			t.Errorf("restarts %d: a group the new leader has not heard from restarted", p.Status.Restarts)
		}
		if p.RequeueAfter != ReportGrace-time.Second {
			t.Errorf("requeue %v, want the end of the grace, %v", p.RequeueAfter, ReportGrace-time.Second)
		}
	})
	t.Run("a worker exit is seen within the grace", func(t *testing.T) {
		exited := slices.Clone(pods)
		exited[2] = epochPod("c", "workers", "", true)
		delete(exited[2].Annotations, jobset.EpochKey)
		p := decidePure(t, js, Observed{Jobs: jobs, Pods: exited, ServiceExists: true, ReportEndpoint: endpoint, ReportsSettling: true, ReportsSince: started}, metav1.NewTime(started.Add(time.Second)), time.Minute)
		if p.Status.Restarts != 1 {
			t.Errorf("restarts %d: a worker's exit must restart the group", p.Status.Restarts)
		}
	})
}
