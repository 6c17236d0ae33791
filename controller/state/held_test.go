package state

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestHolds(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "js"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		// setup: what is done to a JobSet that held its restart since t0
		then func(h *Holds)
		// want: what it is then held since (the JobSet of UID "uid-1")
		want time.Time
	}{
		"held: since it was first":          {then: func(*Holds) {}, want: t0},
		"held again later: the later since": {then: func(h *Holds) { h.Record(key, "uid-1", t0.Add(time.Second)) }, want: t0.Add(time.Second)},
		"no longer held: nothing":           {then: func(h *Holds) { h.Record(key, "uid-1", time.Time{}) }, want: time.Time{}},
		"the JobSet gone: nothing":          {then: func(h *Holds) { h.Forget(key) }, want: time.Time{}},
		"another JobSet of the name since: nothing of the first's": {
			then: func(h *Holds) { h.Record(key, "uid-2", t0.Add(time.Second)) }, want: time.Time{}},
		"another JobSet held: the first's unchanged": {
			then: func(h *Holds) {
				h.Record(types.NamespacedName{Namespace: "ns", Name: "other"}, "uid-3", t0.Add(time.Second))
			}, want: t0},
	} {
		t.Run(name, func(t *testing.T) {
			var h Holds
			if got := h.Since(key, "uid-1"); !got.IsZero() {
				t.Fatalf("nothing recorded: held since %v", got)
			}
			h.Record(key, "uid-1", t0)
			tc.then(&h)
			if got := h.Since(key, "uid-1"); !got.Equal(tc.want) {
				t.Errorf("held since %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHoldsAreForgottenAndKeyedByUID(t *testing.T) {
	var h Holds
	key := types.NamespacedName{Namespace: "ns", Name: "train"}
	since := time.Unix(1000, 0)
	h.Record(key, "u1", since)
	if got := h.Since(key, "u1"); !got.Equal(since) {
		t.Errorf("get = %v, want %v", got, since)
	}
	if got := h.Since(key, "u2"); !got.IsZero() {
		t.Errorf("a JobSet of the same name, another UID: get = %v, want zero", got)
	}
	h.Record(key, "u1", time.Time{})
	if got := h.Since(key, "u1"); !got.IsZero() {
		t.Errorf("after a plan that holds nothing: get = %v, want zero", got)
	}
}
