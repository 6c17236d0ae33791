package testutil

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"sigs.k8s.io/yaml"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// RestartStateCase is a JobSet of the API's restart-state fixtures and
// the state it is in (jobset.RestartStateOf).
type RestartStateCase struct {
	Name   string              `json:"name"`
	State  jobset.RestartState `json:"state"`
	JobSet jobset.JobSet       `json:"jobSet"`
}

// RestartStates reads the API's restart-state fixtures
// (api/jobset/v1alpha2/testdata/restart-states.yaml), a JobSet for every
// state, which the tests of each reader of the state walk.
func RestartStates(tb testing.TB) []RestartStateCase {
	tb.Helper()
	_, here, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "..", "..", "api", "jobset", "v1alpha2", "testdata", "restart-states.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	var cases []RestartStateCase
	if err := yaml.UnmarshalStrict(data, &cases); err != nil {
		tb.Fatal(err)
	}
	return cases
}
