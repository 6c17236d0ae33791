package inject

import (
	"testing"
	"time"

	"github.com/inplace-dev/inplace/api/protocol"
)

// The supervisor's in-process flags come from the JobSet's annotations,
// held to the policy's bounds should the policy be off.
func TestInProcessFlags(t *testing.T) {
	inProcess := func(extra map[string]string) map[string]string {
		a := map[string]string{protocol.RestartScopeAnnotation: protocol.RestartScopeInProcess}
		for k, v := range extra {
			a[k] = v
		}
		return a
	}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		park        time.Duration
		standby     bool
	}{
		{"container scope", map[string]string{}, 0, false},
		{"process scope, annotated", map[string]string{protocol.RestartScopeAnnotation: protocol.RestartScopeProcess,
			protocol.ParkDeadlineAnnotation: "20s", protocol.StandbyAnnotation: "true"}, 0, false},
		{"in-process, defaults", inProcess(nil), protocol.DefaultParkDeadline, false},
		{"in-process, set", inProcess(map[string]string{protocol.ParkDeadlineAnnotation: "20s", protocol.StandbyAnnotation: "true"}), 20 * time.Second, true},
		{"in-process, below the bounds", inProcess(map[string]string{protocol.ParkDeadlineAnnotation: "500ms"}), time.Second, false},
		{"in-process, above the bounds", inProcess(map[string]string{protocol.ParkDeadlineAnnotation: "1h"}), 10 * time.Minute, false},
		{"in-process, unreadable", inProcess(map[string]string{protocol.ParkDeadlineAnnotation: "soon", protocol.StandbyAnnotation: "yes"}), protocol.DefaultParkDeadline, false},
	} {
		if got := parkDeadline(tc.annotations); got != tc.park {
			t.Errorf("%s: parkDeadline = %s, want %s", tc.name, got, tc.park)
		}
		if got := standbyOn(tc.annotations); got != tc.standby {
			t.Errorf("%s: standbyOn = %v, want %v", tc.name, got, tc.standby)
		}
	}
}
