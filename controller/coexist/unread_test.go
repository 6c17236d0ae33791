package coexist

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestUnread(t *testing.T) {
	since := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	err := errors.New("the server is currently unable to handle the request")
	running := Verdict{Message: "the JobSet CRD is inplace's and upstream JobSet's controller is not running", CRD: CRD{Installed: true, Ours: true, Served: true}}
	upstream := Verdict{Hold: true, Reason: ReasonUpstreamRunning, Message: "upstream JobSet's controller is running", Upstream: &Lease{Held: true}}

	for name, tc := range map[string]struct {
		last    Verdict
		known   bool
		failing time.Duration
		// want
		verdict *Verdict // nil: held, with reason
		reason  string
	}{
		"a verdict to run stands through the grace": {
			last: running, known: true, failing: ReadGrace - time.Millisecond, verdict: &running,
		},
		"a verdict to hold stands through the grace": {
			last: upstream, known: true, failing: time.Second, verdict: &upstream,
		},
		"past the grace: held, for the failure": {
			last: running, known: true, failing: ReadGrace, reason: ReasonCheckFailing,
		},
		"nothing known: held, warning no JobSet yet": {
			failing: 0, reason: "",
		},
		"nothing known, past the grace: held, for the failure": {
			failing: ReadGrace, reason: ReasonCheckFailing,
		},
	} {
		t.Run(name, func(t *testing.T) {
			v := Unread(tc.last, tc.known, since, since.Add(tc.failing), err, UpstreamNamespace)
			if tc.verdict != nil {
				if v.Hold != tc.verdict.Hold || v.Reason != tc.verdict.Reason || v.Message != tc.verdict.Message {
					t.Errorf("Unread = %+v, want the last verdict %+v", v, *tc.verdict)
				}
				return
			}
			if !v.Hold || v.Reason != tc.reason {
				t.Errorf("Unread = hold %v, reason %q; want held, reason %q", v.Hold, v.Reason, tc.reason)
			}
			for _, m := range []string{err.Error(), "customresourcedefinitions/" + CRDName, "jobset-system"} {
				if !strings.Contains(v.Message, m) {
					t.Errorf("message %q does not mention %q", v.Message, m)
				}
			}
			if v.CRD.Installed != tc.last.CRD.Installed || v.CRD.Ours != tc.last.CRD.Ours {
				t.Errorf("CRD %+v, want the last one read, %+v", v.CRD, tc.last.CRD)
			}
		})
	}
}
