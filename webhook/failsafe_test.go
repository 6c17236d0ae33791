package webhook

import (
	"context"
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/inplace-dev/inplace/policies"
)

var jobSetJSON = []byte(`{"apiVersion":"jobset.x-k8s.io/v1alpha2","kind":"JobSet","metadata":{"name":"js","namespace":"ns"},"spec":{"replicatedJobs":[{"name":"w","replicas":1,"template":{"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"i"}]}}}}}]}}`)

func engineWith(t *testing.T, src string) *policies.Engine {
	t.Helper()
	engine, err := policies.NewEngine(nil)
	if err != nil {
		t.Fatal(err)
	}
	if src != "" {
		p, err := policies.Compile("guard", src, policies.Deny, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		engine.SetPolicy(p)
	}
	return engine
}

type handler interface {
	Handle(context.Context, admission.Request) admission.Response
}

// Until the policies are loaded, neither webhook admits anything.
func TestNothingIsAdmittedBeforeThePoliciesAreLoaded(t *testing.T) {
	ready := false
	opts := Options{Engine: engineWith(t, ""), Ready: func() bool { return ready }}
	for name, h := range map[string]handler{"mutating": NewMutator(opts), "validating": NewValidator(opts)} {
		ready = false
		resp := h.Handle(context.Background(), request(jobSetJSON))
		if resp.Allowed || resp.Result.Code != 503 || !strings.Contains(resp.Result.Message, "still loading the JobSetPolicies") {
			t.Errorf("%s, not ready: %+v, want refused with 503", name, resp.Result)
		}
		ready = true
		if resp := h.Handle(context.Background(), request(jobSetJSON)); !resp.Allowed {
			t.Errorf("%s, ready: refused: %+v", name, resp.Result)
		}
	}
}

// failingReader fails every read, as a cache or apiserver in trouble does.
type failingReader struct{ client.Reader }

func (failingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New("connection refused")
}

// A namespace whose labels cannot be read refuses the request: a policy
// selected by them would otherwise be skipped.
func TestNamespaceLookupThatFailsRefuses(t *testing.T) {
	opts := Options{Engine: engineWith(t, "package guard\n\ndeny contains \"x\" if false\n"), Reader: failingReader{}}
	for name, h := range map[string]handler{"mutating": NewMutator(opts), "validating": NewValidator(opts)} {
		resp := h.Handle(context.Background(), request(jobSetJSON))
		if resp.Allowed || !strings.Contains(resp.Result.Message, "reading namespace ns for the policies' namespace selectors: connection refused") {
			t.Errorf("%s: %+v, want refused naming the lookup", name, resp.Result)
		}
	}
	// Without admin policies no selector needs the namespace.
	opts.Engine = engineWith(t, "")
	if resp := NewValidator(opts).Handle(context.Background(), request(jobSetJSON)); !resp.Allowed {
		t.Errorf("no admin policy, failing reader: refused: %+v", resp.Result)
	}
}
