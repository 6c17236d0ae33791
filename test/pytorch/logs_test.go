package pytorch

import (
	"testing"
	"time"
)

func TestReadRun(t *testing.T) {
	first := ParseLog(`2026-11-26T12:00:00.100000000Z rank 0 of 4 starts training
2026-11-26T12:00:00.200000000Z step 1 loss 5.979346
2026-11-26T12:00:00.300000000Z step 2 loss 4.5
2026-11-26T12:00:00.400000000Z saved checkpoint at step 2
2026-11-26T12:00:00.500000000Z step 3 loss 3.25
2026-11-26T12:00:00.600000000Z rank 1 crashes with exit code 1 at step 4, as /tmp/inplace-crash asked
not a timestamped line
`, true)
	r := ReadRun(first)
	if !r.Crashed || r.CrashCode != 1 || r.CrashStep != 4 || !r.CrashAt.Equal(time.Date(2026, 11, 26, 12, 0, 0, 600000000, time.UTC)) {
		t.Errorf("crash: %v code %d step %d at %v", r.Crashed, r.CrashCode, r.CrashStep, r.CrashAt)
	}
	if r.LastSaved() != 2 || r.Loss[1] != 5.979346 || r.Loss[3] != 3.25 || r.Done {
		t.Errorf("saved %d, losses %v, done %v", r.LastSaved(), r.Loss, r.Done)
	}

	pod0 := ParseLog("rank 0 resumed from checkpoint at step 2\nrank 1 resumed from checkpoint at step 2\nstep 3 loss 3.25\ntraining done at step 3\n", false)
	pod1 := ParseLog("rank 2 resumed from checkpoint at step 2\nrank 3 resumed from checkpoint at step 1\n", false)
	second := ReadRun(pod0, pod1)
	if _, err := second.ResumedStep(4); err == nil {
		t.Error("ranks that resumed from different steps: no error")
	}
	pod1 = ParseLog("rank 2 resumed from checkpoint at step 2\nrank 3 resumed from checkpoint at step 2\n", false)
	if step, err := ReadRun(pod0, pod1).ResumedStep(4); err != nil || step != 2 {
		t.Errorf("resumed step %d, %v; want 2", step, err)
	}
	if _, err := ReadRun(pod0).ResumedStep(4); err == nil {
		t.Error("two of four ranks resumed: no error")
	}
	if !second.Done {
		t.Error("training done not seen")
	}
}
