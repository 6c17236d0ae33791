package restartbench

import (
	"net/http"
	"net/url"
	"testing"
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
