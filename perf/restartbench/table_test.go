package restartbench

import (
	"strings"
	"testing"
	"time"
)

// Every strategy's first start is set against Recreate's at the same size,
// the idle sidecar's too: it is not a base of its own.
func TestFirstStartsAgainstRecreate(t *testing.T) {
	var b strings.Builder
	FirstStarts(&b, Report{FirstStarts: []FirstStart{
		{Nodes: 16, Strategy: string(Recreate), Took: 2 * time.Second},
		{Nodes: 16, Strategy: string(RecreateSidecar), Took: 2500 * time.Millisecond},
		{Nodes: 16, Strategy: string(InPlaceProcess), Took: 3 * time.Second},
	}})
	for _, want := range []string{"16 Recreate/sidecar 2.50s +0.50 s", "16 InPlaceRestart/process 3.00s +1.00 s"} {
		if !strings.Contains(strings.Join(strings.Fields(b.String()), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if _, err := ParseStrategies("Recreate/sidecar"); err != nil {
		t.Error(err)
	}
	if (Config{Strategies: []Strategy{RecreateSidecar}, RealNodes: 4, Repeats: 1}).validate() == nil {
		t.Error("Recreate/sidecar with restarts: want an error, it measures first starts only")
	}
}
