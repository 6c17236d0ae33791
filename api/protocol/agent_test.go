package protocol

import (
	"slices"
	"testing"
)

func TestIsUpstreamAgent(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		want bool
	}{
		{UpstreamAgentName, []string{EnvJobSetName, EnvPodName}, true},
		{"agent", []string{EnvJobSetName, EnvPodName, "IN_PLACE_RESTART_EXIT_CODE"}, true},
		{"trainer", []string{EnvJobSetName, EnvPodName, "WORKER_COMMAND"}, true},
		// A worker that happens to set one of upstream's variables, without
		// the agent's JobSet and Pod.
		{"trainer", []string{"WORKER_COMMAND"}, false},
		{UpstreamAgentName, []string{EnvPodName}, false},
		{"inplace-agent", []string{EnvJobSetName, EnvPodName, EnvRestartExitCode}, false},
	} {
		if got := IsUpstreamAgent(tc.name, slices.Values(tc.env)); got != tc.want {
			t.Errorf("IsUpstreamAgent(%q, %v) = %v, want %v", tc.name, tc.env, got, tc.want)
		}
	}
}
