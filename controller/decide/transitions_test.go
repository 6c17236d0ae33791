package decide

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
)

// These tests walk an InPlaceRestart JobSet through the transitions of its
// restart path that real clusters exercise: a suspension and a resume
// (Kueue's preemption), a RestartJob, a Pod that finished, an epoch nobody
// broadcast, a Pod replaced before the sync.

// syncedPods are the four Pods of inPlaceJobSet at epoch.
func syncedPods(epoch string) []corev1.Pod {
	return []corev1.Pod{epochPod("a", "driver", epoch, false), epochPod("b", "driver", epoch, false),
		epochPod("c", "workers", epoch, false), epochPod("d", "workers", epoch, false)}
}

func TestSuspendIsNoRestart(t *testing.T) {
	js := inPlaceJobSet(0, 1)
	js.Spec.FailurePolicy.MaxRestarts = 0
	jobs := jobList(readyJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0)))

	// Suspended: the Jobs are suspended and their Pods go away.
	js.Spec.Suspend = ptr.To(true)
	p := decidePure(t, js, Observed{Jobs: jobs, Pods: syncedPods("1"), ServiceExists: true}, at(0), time.Minute)
	if diff := cmp.Diff([]string{"js-driver-0", "js-workers-0"}, names(p.SuspendJobs)); diff != "" {
		t.Errorf("suspended Jobs (-want +got):\n%s", diff)
	}
	js.Status = p.Status
	for _, pods := range [][]corev1.Pod{nil, {epochPod("a", "driver", "1", true)}} {
		p = decidePure(t, js, Observed{Jobs: jobs, Pods: pods, ServiceExists: true, Broadcast: p.Broadcast}, at(1), time.Minute)
		if p.Status.Restarts != 0 || p.Status.RestartsCountTowardsMax != 0 || jobset.Finished(&p.Status) {
			t.Fatalf("a suspension with %d Pods left counted a restart or ended the JobSet: %+v", len(pods), p.Status)
		}
		if p.Status.DeprecatedEpoch != 1 || p.Status.SyncedEpoch != 1 {
			t.Errorf("epochs %d/%d, want 1/1: the group is over without a restart", p.Status.DeprecatedEpoch, p.Status.SyncedEpoch)
		}
	}
	if c := findCondition(&p.Status, jobset.JobSetSuspended); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("suspended condition %+v", c)
	}

	// Resumed: the new Pods report the next epoch and sync without a
	// restart; a later failure is the first restart, and with maxRestarts
	// 0 it fails the JobSet.
	js.Status = p.Status
	js.Spec.Suspend = ptr.To(false)
	p = decidePure(t, js, Observed{Jobs: jobs, Pods: syncedPods("2"), ServiceExists: true, Broadcast: p.Broadcast}, at(2), time.Minute)
	if p.Status.SyncedEpoch != 2 || p.Status.Restarts != 0 {
		t.Fatalf("after the resume: synced %d restarts %d, want 2 and 0", p.Status.SyncedEpoch, p.Status.Restarts)
	}
	js.Status = p.Status
	pods := syncedPods("2")
	pods[2] = epochPod("c", "workers", "2", true)
	p = decidePure(t, js, Observed{Jobs: jobs, Pods: pods, ServiceExists: true, Broadcast: p.Broadcast}, at(3), time.Minute)
	if c := findCondition(&p.Status, jobset.JobSetFailed); c == nil || c.Reason != ReasonReachedMaxRestarts {
		t.Errorf("a failure after the resume with maxRestarts 0: failed condition %+v", c)
	}
}

func TestSuspendEndsAnInPlaceRestartWithoutItsTimeout(t *testing.T) {
	js := inPlaceJobSet(0, 1)
	jobs := jobList(readyJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0)))
	pods := syncedPods("1")
	pods[3] = epochPod("d", "workers", "1", true)
	p := decidePure(t, js, Observed{Jobs: jobs, Pods: pods, ServiceExists: true}, at(0), time.Minute)
	if c := findCondition(&p.Status, jobset.JobSetRestarting); c == nil || c.Reason != ReasonInPlaceRestart {
		t.Fatalf("restarting condition %+v", c)
	}

	// Preempted in the middle of the restart, and left suspended past the
	// in-place timeout: no recreation, no second restart.
	js.Status = p.Status
	js.Spec.Suspend = ptr.To(true)
	p = decidePure(t, js, Observed{Jobs: jobs, ServiceExists: true, Broadcast: p.Broadcast}, at(1), time.Minute)
	c := findCondition(&p.Status, jobset.JobSetRestarting)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonInPlaceRestartSuspended {
		t.Errorf("restarting condition after the suspension %+v", c)
	}
	js.Status = p.Status
	p = decidePure(t, js, Observed{Jobs: jobs, ServiceExists: true, Broadcast: p.Broadcast}, at(600), time.Minute)
	if p.Status.Restarts != 1 || p.Status.InPlaceRestarts != 1 || len(p.DeleteJobs) != 0 {
		t.Errorf("suspended past the timeout: restarts %d (in place %d), delete %v; want the one restart and no recreation",
			p.Status.Restarts, p.Status.InPlaceRestarts, names(p.DeleteJobs))
	}
}

func TestResumeCarriesTheTemplateChangedWhileSuspended(t *testing.T) {
	js := inPlaceJobSet(0, 0)
	js.Spec.Suspend = ptr.To(true)
	cached := buildJob(js, 1, 0, true, nil)
	// The Job API's own labels, which its selector matches.
	cached.Spec.Template.Labels[batchv1.JobNameLabel] = cached.Name
	cached.Spec.Template.Labels[batchv1.ControllerUidLabel] = "job-uid"
	cached.Spec.Template.Labels["old-flavor"] = "a"
	cached.Spec.Template.Spec.NodeSelector = map[string]string{"old-flavor": "a"}

	// What Kueue writes when it admits the JobSet to a flavor, in the
	// update that resumes it.
	js.Spec.Suspend = ptr.To(false)
	tpl := &js.Spec.ReplicatedJobs[1].Template.Spec.Template
	tpl.Labels = map[string]string{"kueue.x-k8s.io/podset": "workers"}
	tpl.Annotations = map[string]string{"kueue.x-k8s.io/workload": "w"}
	tpl.Spec.NodeSelector = map[string]string{"cloud.google.com/gke-nodepool": "tpu"}
	tpl.Spec.Tolerations = []corev1.Toleration{{Key: "tpu", Operator: corev1.TolerationOpExists}}
	tpl.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/topology"}}

	p := decidePure(t, js, Observed{Jobs: jobList(buildJob(js, 0, 0, true, nil), cached), ServiceExists: true}, at(0), time.Minute)
	var got *batchv1.Job
	for _, u := range p.ResumeJobs {
		if u.Cached.Name == cached.Name {
			got = u.Want
		}
	}
	if got == nil {
		t.Fatalf("resumed %v, want %s among them", updatedNames(p.ResumeJobs), cached.Name)
	}
	pod := got.Spec.Template
	if ptr.Deref(got.Spec.Suspend, true) {
		t.Errorf("the Job stays suspended")
	}
	for k, v := range map[string]string{"kueue.x-k8s.io/podset": "workers", batchv1.JobNameLabel: cached.Name, batchv1.ControllerUidLabel: "job-uid", jobset.JobSetNameKey: "js"} {
		if pod.Labels[k] != v {
			t.Errorf("label %s = %q, want %q (labels %v)", k, pod.Labels[k], v, pod.Labels)
		}
	}
	if pod.Labels["old-flavor"] != "a" {
		t.Errorf("a label the Job had beside the template's is dropped (upstream JobSet merges): %v", pod.Labels)
	}
	if _, ok := pod.Spec.NodeSelector["old-flavor"]; ok {
		t.Errorf("an earlier flavor's node selector is kept: %v", pod.Spec.NodeSelector)
	}
	if pod.Annotations["kueue.x-k8s.io/workload"] != "w" {
		t.Errorf("annotations %v", pod.Annotations)
	}
	if diff := cmp.Diff(tpl.Spec.NodeSelector, pod.Spec.NodeSelector); diff != "" {
		t.Errorf("nodeSelector (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(tpl.Spec.Tolerations, pod.Spec.Tolerations); diff != "" {
		t.Errorf("tolerations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(tpl.Spec.SchedulingGates, pod.Spec.SchedulingGates); diff != "" {
		t.Errorf("schedulingGates (-want +got):\n%s", diff)
	}
	if cached.Spec.Template.Spec.NodeSelector["old-flavor"] != "a" {
		t.Errorf("resumedJob changed the cache's Job")
	}
}

func TestEpochNobodyBroadcastCostsNoRestart(t *testing.T) {
	js := inPlaceJobSet(0, 1)
	jobs := jobList(readyJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0)))
	for _, raw := range []string{"999999", "3", "-1", "x"} {
		pods := syncedPods("1")
		pods[1] = epochPod("b", "driver", raw, false)
		p := decidePure(t, js, Observed{Jobs: jobs, Pods: pods, ServiceExists: true}, at(0), time.Minute)
		if p.Status.Restarts != 0 || p.Status.DeprecatedEpoch != 0 {
			t.Errorf("epoch %q on one Pod: restarts %d, deprecated %d; want nothing", raw, p.Status.Restarts, p.Status.DeprecatedEpoch)
		}
		if !hasEvent(p.Warnings, ReasonInvalidEpoch, "Pod b") {
			t.Errorf("epoch %q: warnings %v, want %s naming Pod b", raw, p.Warnings, ReasonInvalidEpoch)
		}
		// Its worker's failure is still seen.
		pods[1].Status.ContainerStatuses = epochPod("b", "driver", raw, true).Status.ContainerStatuses
		p = decidePure(t, js, Observed{Jobs: jobs, Pods: pods, ServiceExists: true}, at(0), time.Minute)
		if p.Status.InPlaceRestarts != 1 {
			t.Errorf("epoch %q and a worker exit: in-place restarts %d, want 1", raw, p.Status.InPlaceRestarts)
		}
	}
}

func TestPodReplacedBeforeTheSyncIsNoMember(t *testing.T) {
	// During a restart, Pod d reported epoch 2 and then failed; its Job
	// replaced it with e, which reported 2 too, and the group synced.
	js := inPlaceJobSet(1, 2)
	jobs := jobList(readyJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0)))
	failed := epochPod("d", "workers", "2", true)
	failed.Status.Phase = corev1.PodFailed
	pods := append(syncedPods("2")[:3], failed, epochPod("e", "workers", "2", false))
	p := decidePure(t, js, Observed{Jobs: jobs, Pods: pods, ServiceExists: true}, at(0), time.Minute)
	if p.Status.Restarts != 0 || p.Status.DeprecatedEpoch != 1 {
		t.Errorf("restarts %d, deprecated %d: the replaced Pod started a restart", p.Status.Restarts, p.Status.DeprecatedEpoch)
	}
	// Without its replacement the group is short, and restarts.
	p = decidePure(t, js, Observed{Jobs: jobs, Pods: pods[:4], ServiceExists: true}, at(0), time.Minute)
	if c := findCondition(&p.Status, jobset.JobSetRestarting); p.Status.InPlaceRestarts != 1 || c == nil || !strings.Contains(c.Message, "Pod d of epoch 2 failed") {
		t.Errorf("a member gone: in-place restarts %d, condition %+v", p.Status.InPlaceRestarts, c)
	}
}

func TestFinishedMemberMakesTheRestartARecreation(t *testing.T) {
	js := inPlaceJobSet(0, 1)
	jobs := jobList(readyJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0)))
	pods := syncedPods("1")
	pods[0].Status.Phase = corev1.PodSucceeded
	p := decidePure(t, js, Observed{Jobs: jobs, Pods: pods, ServiceExists: true}, at(0), time.Minute)
	if p.Status.Restarts != 0 {
		t.Fatalf("a finished Pod alone restarted the group: %+v", p.Status)
	}
	pods[3] = epochPod("d", "workers", "1", true)
	p = decidePure(t, js, Observed{Jobs: jobs, Pods: pods, ServiceExists: true}, at(1), time.Minute)
	if p.Status.Restarts != 1 || p.Status.InPlaceRestarts != 0 || p.Status.RestartsCountTowardsMax != 1 {
		t.Errorf("restarts %d, in place %d, counted %d; want one recreation counted once", p.Status.Restarts, p.Status.InPlaceRestarts, p.Status.RestartsCountTowardsMax)
	}
	if c := findCondition(&p.Status, jobset.JobSetRestarting); c == nil || c.Reason != ReasonInPlaceRestartImpossible || !strings.Contains(c.Message, "Pod a has finished") {
		t.Errorf("restarting condition %+v", c)
	}
	js.Status = p.Status
	p = decidePure(t, js, Observed{Jobs: jobs, Pods: pods, ServiceExists: true}, at(2), time.Minute)
	if len(p.DeleteJobs) != 2 {
		t.Errorf("the Jobs are not recreated: delete %v", names(p.DeleteJobs))
	}
}

func TestRestartJobInPlaceIsCountedOnce(t *testing.T) {
	js := inPlaceJobSet(0, 1)
	js.Spec.FailurePolicy.Rules = []jobset.FailurePolicyRule{{Name: "job", Action: jobset.RestartJob}}
	driver := readyJob(jobOf(js, "driver", 0))
	workers := failedJob(jobOf(js, "workers", 0), batchv1.JobReasonPodFailurePolicy, "exit 5", at(0))
	p := decidePure(t, js, Observed{Jobs: jobList(driver, workers), Pods: syncedPods("1")[:2], ServiceExists: true}, at(0), time.Minute)
	if got := countedRestarts(&p.Status); got != 1 {
		t.Fatalf("counted restarts %d after the RestartJob, want 1", got)
	}

	// The failed Job is recreated; the driver's Pods lost their group.
	js.Status = p.Status
	p = decidePure(t, js, Observed{Jobs: jobList(driver), Pods: syncedPods("1")[:2], ServiceExists: true, Broadcast: p.Broadcast}, at(1), time.Minute)
	if got := countedRestarts(&p.Status); got != 1 || p.Status.InPlaceRestarts != 0 {
		t.Errorf("counted restarts %d (in place %d) once the group saw its loss, want 1 (0)", got, p.Status.InPlaceRestarts)
	}
	if p.Status.DeprecatedEpoch != 1 || p.Broadcast["deprecatedEpoch"] != "1" {
		t.Errorf("deprecated %d, broadcast %v: the other Pods must restart in place", p.Status.DeprecatedEpoch, p.Broadcast)
	}
}

func TestDependsOnOrdersTheBarriers(t *testing.T) {
	js := inPlaceJobSet(0, 1)
	js.Spec.ReplicatedJobs[1].DependsOn = []jobset.DependsOn{{Name: "driver", Status: jobset.DependencyReady}}
	p := pods(1, 1, 1, 1)
	p[0].Ready = false
	if diff := cmp.Diff([]string{"driver"}, decideEpochs(js, groupsOf(p)).openReplicatedJobs); diff != "" {
		t.Errorf("driver not ready: open barriers (-want +got):\n%s", diff)
	}
	p[0].Ready = true
	if diff := cmp.Diff([]string{"driver", "workers"}, decideEpochs(js, groupsOf(p)).openReplicatedJobs); diff != "" {
		t.Errorf("driver ready: open barriers (-want +got):\n%s", diff)
	}

	js.Spec.ReplicatedJobs[1].DependsOn[0].Status = jobset.DependencyComplete
	if diff := cmp.Diff([]string{"driver"}, decideEpochs(js, groupsOf(p)).openReplicatedJobs); diff != "" {
		t.Errorf("driver ready, not complete: open barriers (-want +got):\n%s", diff)
	}
	p[0].Finished, p[1].Finished = true, true
	if diff := cmp.Diff([]string{"driver", "workers"}, decideEpochs(js, groupsOf(p)).openReplicatedJobs); diff != "" {
		t.Errorf("driver complete: open barriers (-want +got):\n%s", diff)
	}
}

func hasEvent(events []Event, reason, part string) bool {
	for _, e := range events {
		if e.Reason == reason && strings.Contains(e.Message, part) {
			return true
		}
	}
	return false
}

func TestFatalExitWithAnotherWorkerRunningDeletesThePod(t *testing.T) {
	js := inPlaceJobSet(0, 1)
	js.Spec.ReplicatedJobs[1].Template.Spec.PodFailurePolicy = failJobOn(5)
	jobs := jobList(readyJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0)))
	pods := syncedPods("1")
	two := func(codes ...int32) corev1.Pod {
		p := epochPod("d", "workers", "1", false)
		p.UID = "uid-d"
		p.Status.Phase = corev1.PodRunning
		p.Spec.Containers = []corev1.Container{{Name: "trainer"}, {Name: "sampler"}}
		for i, name := range []string{"trainer", "sampler"} {
			s := corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
			if i < len(codes) {
				s.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: codes[i]}}
			}
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, s)
		}
		return p
	}

	pods[3] = two(5)
	p := decidePure(t, js, Observed{Jobs: jobs, Pods: pods, ServiceExists: true}, at(0), time.Minute)
	if len(p.DeletePods) != 1 || p.DeletePods[0].Pod.Name != "d" || p.DeletePods[0].Pod.UID != "uid-d" {
		t.Fatalf("delete pods %v, want Pod d", p.DeletePods)
	}
	if why := p.DeletePods[0].Why; p.Status.Restarts != 0 || why.Reason != ReasonFatalExitPodDeleted || !strings.Contains(why.Message, "container trainer of Pod d") {
		t.Errorf("restarts %d, deletion's Event %+v: want no restart and a %s", p.Status.Restarts, why, ReasonFatalExitPodDeleted)
	}

	// Every worker exited: the kubelet fails the Pod itself.
	pods[3] = two(5, 0)
	if p = decidePure(t, js, Observed{Jobs: jobs, Pods: pods, ServiceExists: true}, at(0), time.Minute); len(p.DeletePods) != 0 {
		t.Errorf("delete pods %v, want none: the Pod fails by itself", p.DeletePods)
	}
	// An exit that does not fail the Job restarts the group in place,
	// once no fatal exit was reported for FatalExitSettle.
	pods[3] = two(1)
	held := Observed{Jobs: jobs, Pods: pods, ServiceExists: true, RestartHeldSince: at(0).Time}
	if p = decidePure(t, js, held, at(2), time.Minute); len(p.DeletePods) != 0 || p.Status.InPlaceRestarts != 1 {
		t.Errorf("exit 1: delete pods %v, in-place restarts %d; want none and 1", p.DeletePods, p.Status.InPlaceRestarts)
	}
}

func TestLossThePodFailurePolicyIgnoresIsNotCounted(t *testing.T) {
	js := inPlaceJobSet(0, 1)
	js.Spec.FailurePolicy.MaxRestarts = 0
	js.Spec.ReplicatedJobs[1].Template.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action:          batchv1.PodFailurePolicyActionIgnore,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
	}}}
	jobs := jobList(readyJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0)))
	pods := syncedPods("1")
	// Evicted: being deleted, with the condition the eviction sets.
	pods[3].DeletionTimestamp = ptr.To(at(0))
	pods[3].Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}
	p := decidePure(t, js, Observed{Jobs: jobs, Pods: pods, ServiceExists: true}, at(0), time.Minute)
	if p.Status.InPlaceRestarts != 1 || p.Status.RestartsCountTowardsMax != 0 || jobset.Finished(&p.Status) {
		t.Errorf("in-place restarts %d, counted %d, terminal %q; want 1 restart not counted", p.Status.InPlaceRestarts, p.Status.RestartsCountTowardsMax, p.Status.TerminalState)
	}
	if c := findCondition(&p.Status, jobset.JobSetRestarting); c == nil || !strings.Contains(c.Message, "not counted towards maxRestarts") {
		t.Errorf("restarting condition %+v", c)
	}

	// The same loss without the condition is counted, and with
	// maxRestarts 0 fails the JobSet.
	pods[3].Status.Conditions = nil
	p = decidePure(t, js, Observed{Jobs: jobs, Pods: pods, ServiceExists: true}, at(0), time.Minute)
	if c := findCondition(&p.Status, jobset.JobSetFailed); c == nil || c.Reason != ReasonReachedMaxRestarts {
		t.Errorf("a deletion the policy does not ignore: failed condition %+v", c)
	}
}

func TestCrashLoopingAgentsPodIsDeletedDuringARestart(t *testing.T) {
	crashLooping := func(name, epoch string) corev1.Pod {
		p := epochPod(name, "workers", epoch, false)
		p.UID = types.UID("uid-" + name)
		p.Spec.InitContainers = []corev1.Container{{Name: "inplace-agent", Env: []corev1.EnvVar{{Name: protocol.EnvRestartExitCode, Value: "88"}}}}
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "inplace-agent", RestartCount: 2,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "trainer", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		return p
	}
	jobsOf := func(js *jobset.JobSet) []batchv1.Job {
		return jobList(readyJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0)))
	}

	// Synced, no restart: an agent that crash-loops beside running workers
	// costs nothing (it resumes when it comes back).
	js := inPlaceJobSet(0, 1)
	pods := syncedPods("1")
	pods[3] = crashLooping("d", "1")
	p := decidePure(t, js, Observed{Jobs: jobsOf(js), Pods: pods, ServiceExists: true}, at(0), time.Minute)
	if len(p.DeletePods) != 0 || p.Status.Restarts != 0 {
		t.Errorf("no restart under way: delete %v, restarts %d; want nothing", p.DeletePods, p.Status.Restarts)
	}

	// A restart under way: the others moved to epoch 2, Pod d's workers
	// still run at 1.
	js = inPlaceJobSet(1, 1)
	setCondition(&js.Status, jobset.JobSetRestarting, metav1.ConditionTrue, ReasonInPlaceRestart, "a worker exited", at(0))
	pods = syncedPods("2")
	pods[3] = crashLooping("d", "1")
	p = decidePure(t, js, Observed{Jobs: jobsOf(js), Pods: pods, ServiceExists: true}, at(0), time.Minute)
	if len(p.DeletePods) != 1 || p.DeletePods[0].Pod.Name != "d" || p.DeletePods[0].Why.Reason != ReasonAgentCrashLoopPodDeleted {
		t.Errorf("delete %v: want Pod d deleted with %s", p.DeletePods, ReasonAgentCrashLoopPodDeleted)
	}
	// The same Pods while the group starts after a resume or a
	// recreation, with no in-place restart under way: nothing is deleted.
	js.Status.Conditions = nil
	if p = decidePure(t, js, Observed{Jobs: jobsOf(js), Pods: pods, ServiceExists: true}, at(0), time.Minute); len(p.DeletePods) != 0 {
		t.Errorf("no in-place restart: delete %v, want none", p.DeletePods)
	}
	setCondition(&js.Status, jobset.JobSetRestarting, metav1.ConditionTrue, ReasonInPlaceRestart, "a worker exited", at(0))
	// Its agent running again: it restarts the Pod itself.
	pods[3].Status.InitContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	if p = decidePure(t, js, Observed{Jobs: jobsOf(js), Pods: pods, ServiceExists: true}, at(0), time.Minute); len(p.DeletePods) != 0 {
		t.Errorf("agent running: delete %v, want none", p.DeletePods)
	}
}

func TestResumeWithAFinishedDependency(t *testing.T) {
	// The driver completed at epoch 1 (the workers depend on it), then the
	// JobSet was suspended and resumed: its Job is complete and not started
	// again, its Pods stay Succeeded at epoch 1.
	js := inPlaceJobSet(1, 1)
	js.Spec.ReplicatedJobs[1].DependsOn = []jobset.DependsOn{{Name: "driver", Status: jobset.DependencyComplete}}
	jobs := jobList(succeededJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0)))
	pods := syncedPods("2")
	for i := range 2 {
		pods[i] = epochPod(pods[i].Name, "driver", "1", false)
		pods[i].Status.Phase = corev1.PodSucceeded
	}
	p := decidePure(t, js, Observed{Jobs: jobs, Pods: pods, ServiceExists: true}, at(0), time.Minute)
	if p.Status.SyncedEpoch != 2 || p.Status.Restarts != 0 {
		t.Fatalf("synced %d, restarts %d: want the resumed workers synced at 2 beside the finished driver", p.Status.SyncedEpoch, p.Status.Restarts)
	}
	if p.Broadcast["openReplicatedJobs"] == "" || !strings.Contains(p.Broadcast["openReplicatedJobs"], "workers") {
		t.Errorf("broadcast %v: the workers' barrier must open, their dependency having completed", p.Broadcast)
	}
	js.Status = p.Status
	p = decidePure(t, js, Observed{Jobs: jobs, Pods: pods, ServiceExists: true, Broadcast: p.Broadcast}, at(1), time.Minute)
	if p.Status.Restarts != 0 || p.Status.DeprecatedEpoch != 1 {
		t.Errorf("restarts %d, deprecated %d: the finished driver is no lost member", p.Status.Restarts, p.Status.DeprecatedEpoch)
	}
}

func TestCrashLoopCountsOnlyTheGroupToSync(t *testing.T) {
	// Resumed after a suspension (deprecated == synced == 1): a Pod of the
	// suspended group, still terminating, whose agent restarted often,
	// is not of the group that is to sync.
	js := inPlaceJobSet(1, 1)
	js.Spec.FailurePolicy.MaxRestarts = 1
	jobs := jobList(readyJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0)))
	agent := func(p corev1.Pod, restarts int32) corev1.Pod {
		p.Spec.InitContainers = []corev1.Container{{Name: "inplace-agent", Env: []corev1.EnvVar{{Name: protocol.EnvRestartExitCode, Value: "88"}}}}
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "inplace-agent", RestartCount: restarts}}
		return p
	}
	old := agent(epochPod("old", "workers", "1", false), 5)
	old.DeletionTimestamp = ptr.To(at(0))
	pods := append(syncedPods("2")[:3], old)
	p := decidePure(t, js, Observed{Jobs: jobs, Pods: pods, ServiceExists: true}, at(0), time.Minute)
	if jobset.Finished(&p.Status) {
		t.Fatalf("an old Pod's agent restarts failed the resumed JobSet: %+v", findCondition(&p.Status, jobset.JobSetFailed))
	}
	// A Pod of the group to sync whose agent crash-loops still fails it.
	pods = append(pods, agent(epochPod("new", "workers", "", false), 2))
	pods[len(pods)-1].Annotations = nil
	p = decidePure(t, js, Observed{Jobs: jobs, Pods: pods, ServiceExists: true}, at(0), time.Minute)
	if c := findCondition(&p.Status, jobset.JobSetFailed); c == nil || !strings.Contains(c.Message, "Pod new") {
		t.Errorf("a new Pod's agent crash-looping: failed condition %+v", c)
	}
}

// TestEveryTransition applies every row of the table of transitions, and
// fails if one is never applied: from each state, a sync, a lost member,
// a scale, a failure the policy restarts or fails, the in-place timeout,
// the success policy, a suspension and a resume.
func TestEveryTransition(t *testing.T) {
	type setup func() *jobset.JobSet
	starting := func() *jobset.JobSet { return inPlaceJobSet(0, 0) }
	running := func() *jobset.JobSet { return inPlaceJobSet(0, 1) }
	// Synced at a size other than the templates'.
	scaled := func() *jobset.JobSet {
		js := running()
		js.Status.SyncedPods = 6
		return js
	}
	restarting := func() *jobset.JobSet {
		js := inPlaceJobSet(1, 1)
		js.Status.Restarts, js.Status.InPlaceRestarts, js.Status.RestartsCountTowardsMax = 1, 1, 1
		setCondition(&js.Status, jobset.JobSetRestarting, metav1.ConditionTrue, ReasonInPlaceRestart, "a worker exited", at(0))
		return js
	}
	// Begun an hour ago: past the in-place timeout.
	restartingLong := func() *jobset.JobSet {
		js := restarting()
		js.Status.Conditions = nil
		setCondition(&js.Status, jobset.JobSetRestarting, metav1.ConditionTrue, ReasonInPlaceRestart, "a worker exited", at(-3600))
		return js
	}
	recreating := func() *jobset.JobSet {
		js := inPlaceJobSet(1, 1)
		js.Status.Restarts, js.Status.RestartsCountTowardsMax = 1, 1
		setCondition(&js.Status, jobset.JobSetRestarting, metav1.ConditionTrue, ReasonRestartDefaultPolicy, "restart attempt 1", at(0))
		return js
	}
	// Recreating without in-place restarts.
	recreatingJobs := func() *jobset.JobSet {
		js := recreating()
		js.Spec.FailurePolicy.RestartStrategy = jobset.Recreate
		return js
	}
	// A restart over: in place (InPlaceRestartCompleted) or a recreation
	// (JobsReady), the condition False.
	restarted := func(reason string) setup {
		return func() *jobset.JobSet {
			js := restarting()
			setCondition(&js.Status, jobset.JobSetRestarting, metav1.ConditionFalse, reason, "over", at(0))
			return js
		}
	}
	suspended := func(under setup) setup {
		return func() *jobset.JobSet {
			js := under()
			js.Spec.Suspend = ptr.To(true)
			setCondition(&js.Status, jobset.JobSetSuspended, metav1.ConditionTrue, ReasonSuspended, MessageSuspended, at(0))
			return js
		}
	}
	type event func(js *jobset.JobSet) Observed
	jobsWith := func(js *jobset.JobSet, edit func(driver, workers *batchv1.Job)) []batchv1.Job {
		driver, workers := readyJob(jobOf(js, "driver", 0)), readyJob(jobOf(js, "workers", 0))
		driver.Spec.Suspend, workers.Spec.Suspend = js.Spec.Suspend, js.Spec.Suspend
		edit(driver, workers)
		return jobList(driver, workers)
	}
	jobFails := func(js *jobset.JobSet) Observed {
		return Observed{ServiceExists: true, Jobs: jobsWith(js, func(_, w *batchv1.Job) { failedJob(w, batchv1.JobReasonBackoffLimitExceeded, "", at(1)) })}
	}
	jobFailsForGood := func(js *jobset.JobSet) Observed {
		js.Spec.FailurePolicy.Rules = []jobset.FailurePolicyRule{{Name: "fatal", Action: jobset.FailJobSet}}
		return jobFails(js)
	}
	oneJobFails := func(js *jobset.JobSet) Observed {
		js.Spec.FailurePolicy.Rules = []jobset.FailurePolicyRule{{Name: "job", Action: jobset.RestartJob}}
		return jobFails(js)
	}
	jobsRun := func(js *jobset.JobSet) Observed {
		return Observed{ServiceExists: true, Jobs: jobsWith(js, func(_, _ *batchv1.Job) {})}
	}
	allSucceed := func(js *jobset.JobSet) Observed {
		return Observed{ServiceExists: true, Jobs: jobsWith(js, func(d, w *batchv1.Job) { succeededJob(d); succeededJob(w) })}
	}
	suspend := func(js *jobset.JobSet) Observed {
		js.Spec.Suspend = ptr.To(true)
		return Observed{ServiceExists: true, Jobs: jobsWith(js, func(_, _ *batchv1.Job) {})}
	}
	resume := func(js *jobset.JobSet) Observed {
		js.Spec.Suspend = ptr.To(false)
		return Observed{ServiceExists: true, Jobs: jobsWith(js, func(d, w *batchv1.Job) { d.Spec.Suspend, w.Spec.Suspend = ptr.To(true), ptr.To(true) })}
	}
	syncAt := func(epoch string) event {
		return func(js *jobset.JobSet) Observed {
			pods := syncedPods(epoch)
			for i := range pods {
				pods[i].Labels[jobset.RestartsKey] = strconv.Itoa(int(jobset.RecreateAttempt(&js.Status)))
			}
			return Observed{ServiceExists: true, Jobs: jobsWith(js, func(_, _ *batchv1.Job) {}), Pods: pods}
		}
	}
	// podsAt are the synced Pods of js at epoch, each changed by edit.
	podsAt := func(epoch string, edit func(pods []corev1.Pod)) event {
		return func(js *jobset.JobSet) Observed {
			o := syncAt(epoch)(js)
			edit(o.Pods)
			return o
		}
	}
	workerExits := podsAt("1", func(pods []corev1.Pod) { pods[3] = epochPod("d", "workers", "1", true) })
	workerExitsBesideAFinishedPod := podsAt("1", func(pods []corev1.Pod) {
		pods[0].Status.Phase = corev1.PodSucceeded
		pods[3] = epochPod("d", "workers", "1", true)
	})
	applied := map[row]bool{}
	var ran, total int
	for name, tc := range map[string]struct {
		from setup
		on   event
		want jobset.RestartState
		// restarting is the RestartingJobSet condition's status and
		// reason after the move, where the row checks it: upstream's
		// JobSetCompleted and JobSetFailed at a finish, whatever it said
		// before.
		restarting string
	}{
		"Starting, every Pod syncs":            {from: starting, on: syncAt("1"), want: jobset.StateRunning, restarting: "none"},
		"Starting, a Job fails":                {from: starting, on: jobFails, want: jobset.StateRecreating},
		"Starting, RestartJob":                 {from: starting, on: oneJobFails, want: jobset.StateStarting, restarting: "none"},
		"Running, a worker exits":              {from: running, on: workerExits, want: jobset.StateRestarting, restarting: "True InPlaceRestart"},
		"Running, scaled":                      {from: scaled, on: syncAt("1"), want: jobset.StateRestarting, restarting: "True InPlaceRestartForScale"},
		"Running, RestartJob":                  {from: running, on: oneJobFails, want: jobset.StateRestarting, restarting: "True InPlaceRestart"},
		"Running, a member finished":           {from: running, on: workerExitsBesideAFinishedPod, want: jobset.StateRecreating, restarting: "True InPlaceRestartImpossible"},
		"Restarting, past the timeout":         {from: restartingLong, on: jobsRun, want: jobset.StateRecreating, restarting: "True InPlaceRestartTimedOut"},
		"Restarting, suspended":                {from: restarting, on: suspend, want: jobset.StateSuspended, restarting: "False InPlaceRestartSuspended"},
		"Recreated without in place, Jobs run": {from: recreatingJobs, on: jobsRun, want: jobset.StateRunning, restarting: "False JobsReady"},
		"Starting, suspended":                  {from: starting, on: suspend, want: jobset.StateSuspended},
		"Starting, every Job succeeds":         {from: starting, on: allSucceed, want: jobset.StateCompleted, restarting: "none"},
		"Restarting, a Job fails for good":     {from: restarting, on: jobFailsForGood, want: jobset.StateFailed, restarting: "False JobSetFailed"},
		"Restarting, every Job succeeds":       {from: restarting, on: allSucceed, want: jobset.StateCompleted, restarting: "False JobSetCompleted"},
		"Recreating, the new Pods sync":        {from: recreating, on: syncAt("2"), want: jobset.StateRunning},
		"Recreating, a new Job fails for good": {from: recreating, on: jobFailsForGood, want: jobset.StateFailed, restarting: "False JobSetFailed"},
		// Differs from upstream on purpose (compatibility.md): the
		// recreation goes on through the suspension.
		"Recreating, suspended":          {from: recreating, on: suspend, want: jobset.StateSuspended, restarting: "True DefaultFailurePolicy"},
		"Recreating, every Job succeeds": {from: recreating, on: allSucceed, want: jobset.StateCompleted, restarting: "False JobSetCompleted"},
		// A condition False already takes the finish's reason too.
		"Restarted in place, every Job succeeds": {from: restarted(ReasonInPlaceRestartDone), on: allSucceed, want: jobset.StateCompleted, restarting: "False JobSetCompleted"},
		"Recreated, a Job fails for good":        {from: restarted(ReasonRestartJobsReady), on: jobFailsForGood, want: jobset.StateFailed, restarting: "False JobSetFailed"},
		"Suspended, resumed":                     {from: suspended(starting), on: resume, want: jobset.StateStarting},
		"Suspended during a recreation, resumed": {from: suspended(recreating), on: resume, want: jobset.StateRecreating},
		"Suspended, a Job had failed for good":   {from: suspended(starting), on: jobFailsForGood, want: jobset.StateFailed},
		"Suspended, every Job had succeeded":     {from: suspended(starting), on: allSucceed, want: jobset.StateCompleted},
	} {
		total++
		t.Run(name, func(t *testing.T) {
			ran++
			js := tc.from()
			obs := tc.on(js)
			p := decidePure(t, js, obs, at(2), time.Minute)
			for _, r := range p.moves {
				applied[r] = true
			}
			if got := jobset.RestartStateOf(js, &p.Status); got != tc.want {
				t.Errorf("state %s, want %s (status %+v)", got, tc.want, p.Status)
			}
			if tc.restarting != "" {
				got := "none"
				if c := findCondition(&p.Status, jobset.JobSetRestarting); c != nil {
					got = string(c.Status) + " " + c.Reason
				}
				if got != tc.restarting {
					t.Errorf("RestartingJobSet %s, want %s", got, tc.restarting)
				}
				// As upstream's: the message is the finish's, the time
				// the condition's last change of status.
				if c := findCondition(&p.Status, jobset.JobSetRestarting); c != nil && c.Status == metav1.ConditionFalse {
					wantMessage := map[string]string{ReasonRestartJobSetCompleted: MessageAllJobsCompleted, ReasonRestartJobSetFailed: MessageRestartJobSetFailed}[c.Reason]
					if wantMessage != "" && c.Message != wantMessage {
						t.Errorf("RestartingJobSet message %q, want %q", c.Message, wantMessage)
					}
					if before := findCondition(&js.Status, jobset.JobSetRestarting); before != nil && before.Status == metav1.ConditionFalse && !c.LastTransitionTime.Equal(&before.LastTransitionTime) {
						t.Errorf("RestartingJobSet changed its transition time from %v to %v without changing its status", before.LastTransitionTime, c.LastTransitionTime)
					}
				}
			}
		})
	}
	// Every row exercised, when every case ran (not under a -run that
	// picks some).
	if ran < total {
		return
	}
	for r, tr := range transitions {
		if !applied[row(r)] {
			t.Errorf("no case applies the transition %q, %v -> %v (%s)", tr.name, tr.from, tr.to, tr.on)
		}
	}
}
