package controller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestReconcilePace(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "train"}
	other := types.NamespacedName{Namespace: "ns", Name: "other"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newJobSetTimes()

	if w := p.paceWait(key, t0); w != 0 {
		t.Fatalf("a JobSet never reconciled waits %v, want 0", w)
	}

	// A reconcile of 10 ms: the next waits paceFactor times as long after
	// its end, and no more than that.
	p.ran(key, t0, t0.Add(10*time.Millisecond))
	end := t0.Add(10 * time.Millisecond)
	if w, want := p.paceWait(key, end), paceFactor*10*time.Millisecond; w != want {
		t.Errorf("right after a 10 ms reconcile: wait %v, want %v", w, want)
	}
	if w, want := p.paceWait(key, end.Add(15*time.Millisecond)), paceFactor*10*time.Millisecond-15*time.Millisecond; w != want {
		t.Errorf("15 ms after a 10 ms reconcile: wait %v, want %v", w, want)
	}
	if w := p.paceWait(key, end.Add(paceFactor*10*time.Millisecond)); w != 0 {
		t.Errorf("once the pace has passed: wait %v, want 0", w)
	}
	if w := p.paceWait(other, end); w != 0 {
		t.Errorf("another JobSet waits %v, want 0: pacing is per JobSet", w)
	}

	// However slow a reconcile, the next waits at most maxPace.
	p.ran(key, t0, t0.Add(time.Minute))
	if w := p.paceWait(key, t0.Add(time.Minute)); w != maxPace {
		t.Errorf("after a one-minute reconcile: wait %v, want maxPace %v", w, maxPace)
	}

	p.forget(key)
	if w := p.paceWait(key, t0.Add(time.Minute)); w != 0 {
		t.Errorf("a forgotten JobSet waits %v, want 0", w)
	}
}
