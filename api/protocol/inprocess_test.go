package protocol

import "testing"

func TestParseWorkerLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		want WorkerLine
		ok   bool
	}{
		{"start 1", WorkerLine{WorkerStart, 1, 0}, true},
		{"stop 12\n", WorkerLine{WorkerStop, 12, 0}, true},
		{"parked 3\r\n", WorkerLine{WorkerParked, 3, 0}, true},
		{"failed 2 1", WorkerLine{WorkerFailed, 2, 1}, true},
		{"failed 2 255\n", WorkerLine{WorkerFailed, 2, 255}, true},
		{"failed 2", WorkerLine{}, false},
		{"failed 2 0", WorkerLine{}, false},
		{"failed 2 256", WorkerLine{}, false},
		{"failed 2 x", WorkerLine{}, false},
		{"failed 2 +1", WorkerLine{}, false},
		{"failed 2 001", WorkerLine{}, false},
		{"failed 0 1", WorkerLine{}, false},
		{"start 1 1", WorkerLine{}, false},
		{"parked 0", WorkerLine{}, false},
		{"parked -1", WorkerLine{}, false},
		{"parked", WorkerLine{}, false},
		{"park 3", WorkerLine{}, false},
		{"parked 3 more", WorkerLine{}, false},
		{"", WorkerLine{}, false},
	} {
		got, err := ParseWorkerLine(tc.line)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseWorkerLine(%q) = %v, %v; want %v, ok %v", tc.line, got, err, tc.want, tc.ok)
		}
		if tc.ok && got.String()+"\n" != tc.line && got.String() != tc.line && got.String()+"\r\n" != tc.line {
			t.Errorf("%v.String() = %q, not the line %q", got, got.String(), tc.line)
		}
	}
}

func TestInProcessScopeIsProcessScope(t *testing.T) {
	for scope, want := range map[string][2]bool{
		"":                    {false, false},
		RestartScopeContainer: {false, false},
		RestartScopeProcess:   {true, false},
		RestartScopeInProcess: {true, true},
	} {
		a := map[string]string{RestartScopeAnnotation: scope}
		if got := [2]bool{ProcessScope(a), InProcessScope(a)}; got != want {
			t.Errorf("scope %q: ProcessScope, InProcessScope = %v, want %v", scope, got, want)
		}
	}
}
