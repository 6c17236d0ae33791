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
