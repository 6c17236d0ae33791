package offline

import (
	"context"
	"strings"
	"testing"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	"github.com/inplace-dev/inplace/policies"
)

const manifest = `apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: train
spec:
  SPEC
  replicatedJobs:
  - name: workers
    template:
      spec:
        template:
          spec:
            containers: [{name: trainer, image: busybox}]
`

func TestCreate(t *testing.T) {
	cfg, err := configv1alpha1.Load("")
	if err != nil {
		t.Fatal(err)
	}
	engine, err := policies.NewEngine(nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAdmitter(cfg.Agent, engine)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, spec string
		// refusal is the start of the API server's text; empty: accepted.
		refusal string
		// stored is in the JobSet stored when accepted.
		stored string
	}{
		{"accepted with the schema's and the webhook's defaults", "suspend: false", "", `"startupPolicyOrder":"AnyOrder"`},
		{"an unknown field", "bogus: 1", `JobSet in version "v1alpha2" cannot be handled as a JobSet: strict decoding error: unknown field "spec.bogus"`, ""},
		{"the OpenAPI schema", "failurePolicy: {maxRestarts: -3}", `JobSet.jobset.x-k8s.io "train" is invalid: spec.failurePolicy.maxRestarts: Invalid value: -3`, ""},
		{"a built-in policy", "failurePolicy: {rules: [{name: r, action: FailJobSet, targetReplicatedJobs: [nope]}]}", `admission webhook "vjobset.inplace.dev" denied the request: JobSet train denied by`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := a.Create(context.Background(), []byte(strings.Replace(manifest, "SPEC", tc.spec, 1)), "ns")
			if err != nil {
				t.Fatal(err)
			}
			if tc.refusal == "" {
				if res.Refusal != "" || !strings.Contains(string(res.Stored), tc.stored) || !strings.Contains(string(res.Stored), `"namespace":"ns"`) {
					t.Errorf("refusal %q, stored %s; want accepted, stored with %s in ns", res.Refusal, res.Stored, tc.stored)
				}
				return
			}
			if !strings.HasPrefix(res.Refusal, tc.refusal) {
				t.Errorf("refusal %q, want it to start with %q", res.Refusal, tc.refusal)
			}
		})
	}
}
