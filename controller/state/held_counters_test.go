package state

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestHeldCounters(t *testing.T) {
	var h HeldCounters
	key := types.NamespacedName{Namespace: "ns", Name: "js"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	bound := 30 * time.Second
	steps := []struct {
		name  string
		owner types.UID
		at    time.Duration
		want  time.Duration
	}{
		{"the first hold waits the bound", "a", 0, bound},
		{"a later one what is left of it", "a", 10 * time.Second, 20 * time.Second},
		{"past the bound: write", "a", 31 * time.Second, 0},
		{"a JobSet recreated under the name holds afresh", "b", 40 * time.Second, bound},
	}
	for _, s := range steps {
		if got := h.Wait(key, s.owner, t0.Add(s.at), bound); got != s.want {
			t.Errorf("%s: Wait = %s, want %s", s.name, got, s.want)
		}
	}
	h.Forget(key)
	if got := h.Wait(key, "b", t0.Add(time.Hour), bound); got != bound {
		t.Errorf("after Forget: Wait = %s, want a new hold of %s", got, bound)
	}
}
