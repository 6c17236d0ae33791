package app

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
)

func statusPod(name, rj string, epoch string, ready bool, agentStart, workerStart time.Time) corev1.Pod {
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{jobset.ReplicatedJobNameKey: rj},
			Annotations: map[string]string{jobset.EpochKey: epoch}},
		Status: corev1.PodStatus{
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "inplace-agent",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(agentStart)}}}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "worker",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(workerStart)}}}},
		},
	}
}

// inPlaceRestarting is the Restarting condition of an in-place restart
// under way.
var inPlaceRestarting = metav1.Condition{Type: string(jobset.JobSetRestarting), Status: metav1.ConditionTrue, Reason: jobset.ReasonInPlaceRestart}

func TestWriteStatus(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	js := &jobset.JobSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train"},
		Spec: jobset.JobSetSpec{
			ReplicatedJobs: []jobset.ReplicatedJob{{Name: "driver", Replicas: 1}, {Name: "workers", Replicas: 2}},
			FailurePolicy:  &jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart, MaxRestarts: 3},
		},
		Status: jobset.JobSetStatus{Restarts: 1, InPlaceRestarts: 1, RestartsCountTowardsMax: 1, DeprecatedEpoch: 1, SyncedEpoch: 2},
	}
	in := statusInputs{
		jobSet:         js,
		broadcast:      &protocol.Broadcast{DeprecatedEpoch: 1, SyncedEpoch: 2, OpenReplicatedJobs: []string{"driver"}},
		agentContainer: "inplace-agent",
		pods: []corev1.Pod{
			statusPod("d-0", "driver", "2", true, t0, t0.Add(time.Second)),
			statusPod("w-0", "workers", "2", false, t0, t0.Add(-time.Hour)),
			statusPod("w-1", "workers", "1", false, t0, t0.Add(-time.Hour)),
		},
		events: []corev1.Event{
			{Reason: "InPlaceRestart", Message: "pod w-1 failed", EventTime: metav1.NewMicroTime(t0.Add(-100 * time.Millisecond))},
			{Reason: "InPlaceRestartCompleted", Message: "done", EventTime: metav1.NewMicroTime(t0.Add(700 * time.Millisecond))},
			{Reason: "InPlaceRestart", Message: "an older one", EventTime: metav1.NewMicroTime(t0.Add(-time.Hour))},
		},
	}
	var out bytes.Buffer
	writeStatusTable(&out, buildStatusReport(in), false)
	got := out.String()
	for _, want := range []string{
		"JobSet ml/train  strategy InPlaceRestart  state Active",
		"restarts 1 (1 in place; 1 of maxRestarts 3 counted)",
		"scope    container\n",
		"epochs   synced 2  deprecated 1\n",
		"POD  EPOCH  READY  WORKER RESTARTS",
		"w-1  1      false  0",
		"driver          1     1                1      lifted",
		"workers         2     1                0      held: waiting for the replicated jobs before it (InOrder)",
		"03:04:04.900  +0.000s         failure seen, epoch deprecated: pod w-1 failed",
		"03:04:05      +0.100..1.100s  every agent restarted",
		"03:04:05.700  +0.800s         every Pod at the new epoch: barriers lifted",
		"03:04:06      +1.100..2.100s  every worker running",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "an older one") {
		t.Errorf("status shows an older restart:\n%s", got)
	}

	// During a restart every barrier holds. The controller deprecates the
	// epoch and sets the Restarting condition in one write.
	js.Status.DeprecatedEpoch = 2
	js.Status.Conditions = []metav1.Condition{inPlaceRestarting}
	out.Reset()
	writeStatusTable(&out, buildStatusReport(in), false)
	if got := out.String(); !strings.Contains(got, "restart in progress: waiting for every Pod at epoch 3") ||
		strings.Count(got, "held: restarting") != 2 {
		t.Errorf("status during a restart:\n%s", got)
	}
}

func TestStatusUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Run(t.Context(), []string{"status"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "name one JobSet") {
		t.Errorf("status without a name: exit %d, %q", code, errOut.String())
	}
}

// In process scope the workers' restarts are the agent's count on the Pod:
// the containers' restartCount does not move.
func TestWriteStatusProcessScope(t *testing.T) {
	js := &jobset.JobSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train", Annotations: map[string]string{protocol.RestartScopeAnnotation: protocol.RestartScopeProcess}},
		Spec: jobset.JobSetSpec{
			ReplicatedJobs: []jobset.ReplicatedJob{{Name: "workers", Replicas: 1}},
			FailurePolicy:  &jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart},
		},
		Status: jobset.JobSetStatus{SyncedEpoch: 3},
	}
	pod := statusPod("w-0", "workers", "3", true, time.Now(), time.Now())
	pod.Annotations[protocol.WorkerRestartsAnnotation] = "2"
	var out bytes.Buffer
	writeStatusTable(&out, buildStatusReport(statusInputs{jobSet: js, pods: []corev1.Pod{pod}}), false)
	for _, want := range []string{"scope    process\n", "w-0  3      true   2"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
}

// -o json and yaml print the report the table shows, every Pod included;
// -o wide adds columns to the table.
func TestStatusReport(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	js := &jobset.JobSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train"},
		Spec: jobset.JobSetSpec{
			ReplicatedJobs: []jobset.ReplicatedJob{{Name: "workers", Replicas: 2}},
			FailurePolicy:  &jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart, MaxRestarts: 3},
		},
		Status: jobset.JobSetStatus{Restarts: 1, InPlaceRestarts: 1, RestartsCountTowardsMax: 1, DeprecatedEpoch: 2, SyncedEpoch: 2,
			Conditions: []metav1.Condition{inPlaceRestarting}},
	}
	w0 := statusPod("w-0", "workers", "2", true, t0, t0)
	w0.Spec.NodeName, w0.Status.Phase = "node-a", corev1.PodRunning
	gone := statusPod("w-old", "workers", "1", false, t0, t0)
	gone.DeletionTimestamp = &metav1.Time{Time: t0}
	in := statusInputs{
		jobSet:         js,
		broadcast:      &protocol.Broadcast{DeprecatedEpoch: 1, SyncedEpoch: 2, OpenReplicatedJobs: []string{"workers"}},
		agentContainer: "inplace-agent",
		pods:           []corev1.Pod{w0, gone},
		events:         []corev1.Event{{Reason: "InPlaceRestart", Message: "pod w-old failed", EventTime: metav1.NewMicroTime(t0)}},
	}
	want := statusReport{
		Namespace: "ml", Name: "train", RestartStrategy: "InPlaceRestart", State: "Active", RestartState: "Restarting",
		Restarts: 1, InPlaceRestarts: 1, RestartsCountTowardsMax: 1, MaxRestarts: 3,
		InPlace: &inPlaceReport{
			Scope: "container", SyncedEpoch: 2, DeprecatedEpoch: 2, WaitingForEpoch: 3,
			Broadcast:      &broadcastReport{DeprecatedEpoch: 1, SyncedEpoch: 2, OpenReplicatedJobs: []string{"workers"}, BehindStatus: true},
			Reports:        "pod",
			ReplicatedJobs: []replicatedJobReport{{Name: "workers", Replicas: 2, Pods: 1, AtSyncedEpoch: 1, Ready: 1, Barrier: "held: restarting"}},
			Pods:           []podReport{{Name: "w-0", ReplicatedJob: "workers", Node: "node-a", Phase: "Running", Epoch: "2", Ready: true, WorkerRestarts: "0"}},
			LastRestart: []moment{
				{At: t0, What: "failure seen, epoch deprecated: pod w-old failed"},
				{At: t0, What: "every agent restarted (last agent start)", Coarse: true},
				{At: t0, What: "every worker running (last worker start)", Coarse: true},
			},
		},
	}
	got := buildStatusReport(in)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}

	// Agents that report to the controller leave their Pods without an
	// epoch: a synced group counts its running Pods at the synced epoch.
	direct := in
	direct.jobSet = js.DeepCopy()
	direct.jobSet.Status.DeprecatedEpoch = 1
	direct.jobSet.Status.Conditions = nil // synced: the restart is over
	direct.broadcast = &protocol.Broadcast{DeprecatedEpoch: 1, SyncedEpoch: 2, Reports: protocol.ReportEndpoint{Address: "10.0.0.5:9445", Session: "s"}}
	silent := w0.DeepCopy()
	delete(silent.Annotations, jobset.EpochKey)
	direct.pods = []corev1.Pod{*silent}
	ip := buildStatusReport(direct).InPlace
	if ip.Reports != "direct" || ip.ReportAddress != "10.0.0.5:9445" || ip.ReplicatedJobs[0].AtSyncedEpoch != 1 {
		t.Errorf("direct reports: reports %q at %q, %d Pods at the synced epoch; want direct, the leader's address, 1", ip.Reports, ip.ReportAddress, ip.ReplicatedJobs[0].AtSyncedEpoch)
	}

	raw, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"restartStrategy":"InPlaceRestart"`, `"waitingForEpoch":3`, `"behindStatus":true`, `"atSyncedEpoch":1`,
		`"workerRestarts":"0"`, `"at":"2026-01-02T03:04:05Z"`, `"coarse":true`} {
		if !strings.Contains(string(raw), field) {
			t.Errorf("JSON lacks %s:\n%s", field, raw)
		}
	}

	var out bytes.Buffer
	writeStatusTable(&out, got, true)
	for _, line := range []string{
		"REPLICATED JOB  REPLICAS  PODS  AT SYNCED EPOCH  READY  BARRIER",
		"workers         2         1     1                1      held: restarting",
		"POD  REPLICATED JOB  NODE    PHASE    EPOCH  READY  WORKER RESTARTS",
		"w-0  workers         node-a  Running  2      true   0",
		"broadcast behind the status: deprecated 1 synced 2",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("the wide table lacks %q:\n%s", line, out.String())
		}
	}

	// A JobSet that restarts by recreating has no in-place section.
	js.Spec.FailurePolicy = nil
	if r := buildStatusReport(statusInputs{jobSet: js}); r.InPlace != nil || r.RestartStrategy != "Recreate" {
		t.Errorf("a Recreate JobSet's report: %+v", r)
	}
}
