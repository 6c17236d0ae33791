package controller

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/controller/internal/testutil"
)

// The grace after a change of leader starts when the JobSet's broadcast
// first names this leader's way of taking reports, and applies whichever
// way either leader takes them, except where the agents reported on their
// Pods all along.
func TestReportsSince(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	js := testutil.JobSet("workers", 2)
	broadcast := func(session string) map[string]string {
		if session == "" {
			return map[string]string{}
		}
		return map[string]string{protocol.KeyReportSession: session}
	}
	type step struct {
		broadcast, mine string
		advance         time.Duration
		wantSince       time.Duration // from the start; -1: zero
		wantSettling    bool
	}
	start := clk.Now()
	for name, steps := range map[string][]step{
		"pod reports all along": {
			{broadcast: "", mine: "", wantSince: -1, wantSettling: false},
			{broadcast: "", mine: "", advance: time.Minute, wantSince: -1, wantSettling: false},
		},
		"a new leader with direct reports": {
			{broadcast: "old", mine: "new", wantSince: -1, wantSettling: true},
			{broadcast: "new", mine: "new", advance: time.Second, wantSince: time.Second, wantSettling: true},
			{broadcast: "new", mine: "new", advance: time.Minute, wantSince: time.Second, wantSettling: true},
		},
		"a new leader without direct reports after one with them": {
			{broadcast: "old", mine: "", wantSince: -1, wantSettling: true},
			{broadcast: "", mine: "", advance: 2 * time.Second, wantSince: 2 * time.Second, wantSettling: true},
			{broadcast: "", mine: "", advance: time.Minute, wantSince: 2 * time.Second, wantSettling: true},
		},
	} {
		t.Run(name, func(t *testing.T) {
			clk.SetTime(start)
			r := &Reconciler{opts: Options{Clock: clk}}
			var elapsed time.Duration
			for i, s := range steps {
				elapsed += s.advance
				clk.SetTime(start.Add(elapsed))
				since, settling := r.reportsSince(js, broadcast(s.broadcast), s.mine)
				want := time.Time{}
				if s.wantSince >= 0 {
					want = start.Add(s.wantSince)
				}
				if !since.Equal(want) || settling != s.wantSettling {
					t.Errorf("step %d: since %v, settling %v; want %v, %v", i, since, settling, want, s.wantSettling)
				}
			}
		})
	}
}
