package restartbench

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRequestKey(t *testing.T) {
	for _, tc := range []struct{ method, url, want string }{
		{"GET", "/api/v1/namespaces/ns/configmaps?fieldSelector=x&watch=true", "watch configmaps"},
		{"GET", "/api/v1/namespaces/ns/pods/p", "get pods"},
		{"GET", "/api/v1/namespaces/ns/pods", "list pods"},
		{"PUT", "/api/v1/namespaces/ns/pods/p/status", "update pods/status"},
		{"PATCH", "/api/v1/namespaces/ns/pods/p", "patch pods"},
		{"PUT", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ns/jobsets/j/status", "update jobsets/status"},
		{"POST", "/apis/events.k8s.io/v1/namespaces/ns/events", "create events"},
		{"GET", "/api/v1/nodes?watch=1", "watch nodes"},
		{"DELETE", "/apis/batch/v1/namespaces/ns/jobs/j", "delete jobs"},
	} {
		u, _ := url.Parse(tc.url)
		if got := requestKey(&http.Request{Method: tc.method, URL: u}); got != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.method, tc.url, got, tc.want)
		}
	}
}

func TestRequestsBetween(t *testing.T) {
	c := newRequestCounter()
	t0 := time.Now()
	for i, key := range []string{"patch pods", "watch configmaps", "patch pods", "update jobsets/status"} {
		c.sent = append(c.sent, sentRequest{at: t0.Add(time.Duration(i) * time.Second), key: key})
	}
	if diff := cmp.Diff(map[string]int{"watch configmaps": 1, "patch pods": 1}, c.between(t0.Add(time.Second), t0.Add(2*time.Second))); diff != "" {
		t.Errorf("between(1s, 2s) (-want +got):\n%s", diff)
	}
	if got := c.between(t0.Add(-time.Second), t0.Add(-time.Millisecond)); len(got) != 0 {
		t.Errorf("between before the first request = %v, want none", got)
	}
	c.forget()
	if got := c.between(t0, t0.Add(time.Hour)); len(got) != 0 {
		t.Errorf("between after forget = %v, want none", got)
	}
}

// Requests like those of the 5,000-worker container-scope restart, with
// reads of the broadcast added: the controller's watches and the upstream
// check's reads come at a rate; its writes and its reads of the broadcast
// come with the restart.
func TestPeriodic(t *testing.T) {
	counts := map[string]int{
		"create events": 2, "get customresourcedefinitions": 7, "get leases": 14, "update configmaps": 4,
		"update jobsets/status": 5, "watch configmaps": 1, "watch jobsets": 1, "watch leases": 2, "watch pods": 8,
		"get configmaps": 3,
	}
	if got, want := periodic(counts), 7+14+1+1+2+8; got != want {
		t.Errorf("periodic = %d, want %d", got, want)
	}
}
