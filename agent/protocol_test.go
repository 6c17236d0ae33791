package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/inplace-dev/inplace/api/protocol"
)

func TestMachine(t *testing.T) {
	type step struct {
		b    protocol.Broadcast
		want Decision
	}
	cases := map[string]struct {
		podEpoch  int32
		workers   Workers
		first     protocol.Broadcast
		wantStart Decision
		steps     []step
	}{
		"in-place restarts off: lift at once, never report nor restart, nor when they are turned on again": {
			first:     protocol.Broadcast{SyncedEpoch: 2, DeprecatedEpoch: 2, Disabled: true},
			wantStart: Decision{LiftBarrier: true},
			steps: []step{
				{protocol.Broadcast{SyncedEpoch: 2, DeprecatedEpoch: 3, Disabled: true}, Decision{}},
				{protocol.Broadcast{SyncedEpoch: 3, DeprecatedEpoch: 3}, Decision{}},
			},
		},
		"in-place restarts turned off after the start: the barrier lifts, no restart": {
			first:     protocol.Broadcast{},
			wantStart: Decision{ReportEpoch: 1},
			steps: []step{
				{protocol.Broadcast{DeprecatedEpoch: 1, Disabled: true}, Decision{LiftBarrier: true}},
			},
		},
		"first start: epoch synced+1, barrier lifts once synced": {
			first:     protocol.Broadcast{},
			wantStart: Decision{ReportEpoch: 1},
			steps: []step{
				{protocol.Broadcast{SyncedEpoch: 0}, Decision{}},
				{protocol.Broadcast{SyncedEpoch: 1}, Decision{LiftBarrier: true}},
				{protocol.Broadcast{SyncedEpoch: 1}, Decision{}},
			},
		},
		"deprecated: restart, then nothing more": {
			first:     protocol.Broadcast{SyncedEpoch: 3, DeprecatedEpoch: 2},
			wantStart: Decision{ReportEpoch: 4},
			steps: []step{
				{protocol.Broadcast{SyncedEpoch: 4, DeprecatedEpoch: 2}, Decision{LiftBarrier: true}},
				{protocol.Broadcast{SyncedEpoch: 4, DeprecatedEpoch: 4}, Decision{Restart: true}},
				{protocol.Broadcast{SyncedEpoch: 4, DeprecatedEpoch: 4}, Decision{}},
			},
		},
		"after an in-place restart the Pod's old epoch is deprecated: a new one": {
			podEpoch:  4,
			first:     protocol.Broadcast{SyncedEpoch: 4, DeprecatedEpoch: 4},
			wantStart: Decision{ReportEpoch: 5},
		},
		"only the agent crashed, workers run: resume without a group restart": {
			podEpoch: 4, workers: WorkersRunning,
			first:     protocol.Broadcast{SyncedEpoch: 4, DeprecatedEpoch: 3},
			wantStart: Decision{LiftBarrier: true},
			steps:     []step{{protocol.Broadcast{SyncedEpoch: 4, DeprecatedEpoch: 3}, Decision{}}},
		},
		"only the agent crashed, after the sync and before it lifted its barrier: resume, then lift": {
			podEpoch: 4, workers: WorkersWaiting,
			first:     protocol.Broadcast{SyncedEpoch: 4, DeprecatedEpoch: 3},
			wantStart: Decision{LiftBarrier: true},
			steps:     []step{{protocol.Broadcast{SyncedEpoch: 4, DeprecatedEpoch: 3}, Decision{}}},
		},
		"only the agent crashed, before the sync: resume, and lift with the sync": {
			podEpoch: 5, workers: WorkersWaiting,
			first:     protocol.Broadcast{SyncedEpoch: 4, DeprecatedEpoch: 4},
			wantStart: Decision{},
			steps:     []step{{protocol.Broadcast{SyncedEpoch: 5, DeprecatedEpoch: 4}, Decision{LiftBarrier: true}}},
		},
		"only the agent crashed before its barrier, and InOrder holds it: resume, wait for the turn": {
			podEpoch: 4, workers: WorkersWaiting,
			first:     protocol.Broadcast{SyncedEpoch: 4, DeprecatedEpoch: 3, OpenReplicatedJobs: []string{"driver"}},
			wantStart: Decision{},
			steps:     []step{{protocol.Broadcast{SyncedEpoch: 4, DeprecatedEpoch: 3, OpenReplicatedJobs: []string{"driver", "workers"}}, Decision{LiftBarrier: true}}},
		},
		"the agent crashed while its epoch was being deprecated: restart": {
			podEpoch: 4, workers: WorkersRunning,
			first:     protocol.Broadcast{SyncedEpoch: 4, DeprecatedEpoch: 4},
			wantStart: Decision{ReportEpoch: 5},
		},
		"workers not running (the whole Pod restarted): new epoch even if not deprecated": {
			podEpoch:  4,
			first:     protocol.Broadcast{SyncedEpoch: 4, DeprecatedEpoch: 3},
			wantStart: Decision{ReportEpoch: 5},
		},
		// A broadcast older than the epoch the Pod carries (a watch served
		// by an API server behind the one that took the report): the
		// admission policy refuses a lower epoch, and a newer broadcast
		// decides.
		"a broadcast older than the Pod's epoch: the epoch is not lowered": {
			podEpoch:  6,
			first:     protocol.Broadcast{SyncedEpoch: 4, DeprecatedEpoch: 4},
			wantStart: Decision{ReportEpoch: 6},
			steps: []step{
				{protocol.Broadcast{SyncedEpoch: 5, DeprecatedEpoch: 6}, Decision{Restart: true}},
			},
		},
		"InOrder: the barrier waits for the replicated job's turn": {
			first:     protocol.Broadcast{SyncedEpoch: 1, OpenReplicatedJobs: []string{}},
			wantStart: Decision{ReportEpoch: 2},
			steps: []step{
				{protocol.Broadcast{SyncedEpoch: 2, OpenReplicatedJobs: []string{"driver"}}, Decision{}},
				{protocol.Broadcast{SyncedEpoch: 2, OpenReplicatedJobs: []string{"driver", "workers"}}, Decision{LiftBarrier: true}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := NewMachine("workers")
			if diff := cmp.Diff(tc.wantStart, m.Start(tc.first, tc.podEpoch, tc.workers)); diff != "" {
				t.Fatalf("Start (-want +got):\n%s", diff)
			}
			for i, s := range tc.steps {
				if diff := cmp.Diff(s.want, m.Observe(s.b)); diff != "" {
					t.Errorf("step %d: Observe(%+v) (-want +got):\n%s", i, s.b, diff)
				}
			}
		})
	}
}

// TestMachineStartsAgain: a start again, from the epoch the Pod carries or
// for process scope's restart of the workers, is a start on the latest
// broadcast that forgets what the machine did before: its barrier, and a
// restart already decided.
func TestMachineStartsAgain(t *testing.T) {
	type step struct {
		in        func(*Machine) Decision
		want      Decision
		wantEpoch int32
	}
	observe := func(b protocol.Broadcast) func(*Machine) Decision {
		return func(m *Machine) Decision { return m.Observe(b) }
	}
	fromPod := func(podEpoch int32, workers Workers) func(*Machine) Decision {
		return func(m *Machine) Decision { return m.StartFromPod(podEpoch, workers) }
	}
	restartWorkers := (*Machine).RestartWorkers
	cases := map[string]struct {
		// setup
		podEpoch int32
		workers  Workers
		first    protocol.Broadcast
		// want
		wantStart Decision
		steps     []step
	}{
		"the Pod carries a later epoch, its workers stopped: a new epoch, never below the Pod's": {
			first:     protocol.Broadcast{SyncedEpoch: 1, DeprecatedEpoch: 1},
			wantStart: Decision{ReportEpoch: 2},
			steps: []step{
				{in: fromPod(3, WorkersStopped), want: Decision{ReportEpoch: 3}, wantEpoch: 3},
				{in: observe(protocol.Broadcast{SyncedEpoch: 3, DeprecatedEpoch: 1}), want: Decision{LiftBarrier: true}, wantEpoch: 3},
			},
		},
		"the Pod carries a later epoch, its workers running at the latest synced epoch: resume, lifted": {
			first:     protocol.Broadcast{SyncedEpoch: 1, DeprecatedEpoch: 1},
			wantStart: Decision{ReportEpoch: 2},
			steps: []step{
				{in: observe(protocol.Broadcast{SyncedEpoch: 3, DeprecatedEpoch: 1}), want: Decision{}, wantEpoch: 2},
				{in: fromPod(3, WorkersRunning), want: Decision{LiftBarrier: true}, wantEpoch: 3},
			},
		},
		"process scope: the workers restart at a new epoch, which lifts and is deprecated in its turn": {
			first:     protocol.Broadcast{},
			wantStart: Decision{ReportEpoch: 1},
			steps: []step{
				{in: observe(protocol.Broadcast{SyncedEpoch: 1}), want: Decision{LiftBarrier: true}, wantEpoch: 1},
				{in: observe(protocol.Broadcast{SyncedEpoch: 1, DeprecatedEpoch: 1}), want: Decision{Restart: true}, wantEpoch: 1},
				{in: restartWorkers, want: Decision{ReportEpoch: 2}, wantEpoch: 2},
				{in: observe(protocol.Broadcast{SyncedEpoch: 1, DeprecatedEpoch: 1}), want: Decision{}, wantEpoch: 2},
				{in: observe(protocol.Broadcast{SyncedEpoch: 2, DeprecatedEpoch: 1}), want: Decision{LiftBarrier: true}, wantEpoch: 2},
				{in: observe(protocol.Broadcast{SyncedEpoch: 2, DeprecatedEpoch: 2}), want: Decision{Restart: true}, wantEpoch: 2},
				{in: restartWorkers, want: Decision{ReportEpoch: 3}, wantEpoch: 3},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := NewMachine("workers")
			if diff := cmp.Diff(tc.wantStart, m.Start(tc.first, tc.podEpoch, tc.workers)); diff != "" {
				t.Fatalf("Start (-want +got):\n%s", diff)
			}
			for i, s := range tc.steps {
				if diff := cmp.Diff(s.want, s.in(m)); diff != "" {
					t.Errorf("step %d (-want +got):\n%s", i, diff)
				}
				if got := m.Epoch(); got != s.wantEpoch {
					t.Errorf("step %d: epoch %d, want %d", i, got, s.wantEpoch)
				}
			}
		})
	}
}
