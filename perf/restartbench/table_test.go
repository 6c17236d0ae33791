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
	for _, want := range []string{"16 Recreate/sidecar 1 2.50s +0.50 s -", "16 InPlaceRestart/process 1 3.00s +1.00 s -"} {
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

// Over rounds, each JobSet is set against the Recreate of its own round,
// and a row gives the median and the range of those differences: a round
// in which the machine ran slow moves both alike.
func TestFirstStartsOverRounds(t *testing.T) {
	var b strings.Builder
	s := func(strategy Strategy, round int, ms int) FirstStart {
		return FirstStart{Nodes: 16, Strategy: string(strategy), Round: round, Took: time.Duration(ms) * time.Millisecond}
	}
	FirstStarts(&b, Report{FirstStarts: []FirstStart{
		s(Recreate, 0, 2000), s(InPlaceProcess, 0, 2600),
		s(Recreate, 1, 9000), s(InPlaceProcess, 1, 9100),
		s(Recreate, 2, 3000), s(InPlaceProcess, 2, 4000),
	}})
	got := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{"16 Recreate 3 3.00s -", "16 InPlaceRestart/process 3 4.00s +0.60 s (+0.10…+1.00 s)"} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	for _, cfg := range []Config{
		{Strategies: []Strategy{Recreate}, FirstStartRounds: 3},
		{Strategies: []Strategy{Recreate}, FirstStartRounds: 3, RealNodes: 4, Repeats: 1},
		{Strategies: []Strategy{Recreate, UpstreamRecreate}, FirstStartRounds: 3, RealNodes: 4},
	} {
		if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), "rounds of first starts") {
			t.Errorf("%+v: got %v, want the rounds' error: rounds of first starts need real nodes, repeats 0 and no upstream strategy", cfg, err)
		}
	}
	if err := (Config{Strategies: []Strategy{Recreate, InPlaceProcess}, FirstStartRounds: 3, RealNodes: 4}).validate(); err != nil {
		t.Error(err)
	}
}
