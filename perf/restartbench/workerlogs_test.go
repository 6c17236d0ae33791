package restartbench

import (
	"testing"
	"time"
)

func TestWorkerStarted(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	log := `inplace-supervisor: barrier of epoch 1 lifted: started the worker (pid 7)
2026-01-02T03:04:04.9Z started pod=w-0 epoch=1
2026-01-02T03:04:05.5Z exiting code=1
inplace-supervisor: barrier of epoch 2 lifted: started the worker (pid 9)
2026-01-02T03:04:06.25Z started pod=w-0 epoch=2
`
	at, ok := workerStarted(log, t0)
	if want := t0.Add(1250 * time.Millisecond); !ok || !at.Equal(want) {
		t.Errorf("start of w-0 after t0: %v %v, want %v", at, ok, want)
	}
	if _, ok := workerStarted(log, t0.Add(2*time.Second)); ok {
		t.Error("a start before t0 was taken")
	}
}
