package review

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/inplace-dev/inplace/policies"
)

func jobSet(name string, labels map[string]any) map[string]any {
	return map[string]any{"metadata": map[string]any{"name": name, "labels": labels}}
}

// TestEveryOriginMakesTheSameInput checks that a JobSet judged on a
// request, in the audit and offline gets the same name and labels, which
// the policies' matchers and input.review read.
func TestEveryOriginMakesTheSameInput(t *testing.T) {
	obj := jobSet("train", map[string]any{"team": "ml"})
	dryRun := true
	req := &admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Name: "train", Namespace: "ns", DryRun: &dryRun,
		UserInfo: authenticationv1.UserInfo{Username: "alice", Groups: []string{"dev"}, Extra: map[string]authenticationv1.ExtraValue{"scope": {"a"}}},
	}
	got := FromRequest(req, obj, nil, map[string]string{"tier": "gold"})
	want := policies.Input{
		Operation: "CREATE", Object: obj, Name: "train", Namespace: "ns", Labels: map[string]string{"team": "ml"},
		NamespaceLabels: map[string]string{"tier": "gold"}, DryRun: true,
		UserInfo: &policies.UserInfo{Username: "alice", Groups: []string{"dev"}, Extra: map[string][]string{"scope": {"a"}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FromRequest (-want +got):\n%s", diff)
	}

	audit := Offline(policies.OperationAudit, "ns", obj, nil, nil)
	if audit.Name != got.Name || !cmp.Equal(audit.Labels, got.Labels) || audit.Namespace != got.Namespace {
		t.Errorf("the audit's input names %q %v in %q, the request's %q %v in %q", audit.Name, audit.Labels, audit.Namespace, got.Name, got.Labels, got.Namespace)
	}
}

func TestWithObjectTakesTheObjectsLabels(t *testing.T) {
	in := Offline("CREATE", "ns", jobSet("train", map[string]any{"team": "ml"}), nil, nil)
	patched := jobSet("train", map[string]any{"team": "ml", "queue": "q"})
	got := WithObject(in, patched)
	if want := map[string]string{"team": "ml", "queue": "q"}; !cmp.Equal(got.Labels, want) {
		t.Errorf("labels %v, want the patched object's %v", got.Labels, want)
	}
	if got.Name != "train" || got.Operation != "CREATE" || got.Namespace != "ns" {
		t.Errorf("WithObject changed the request: %+v", got)
	}
	if in.Labels["queue"] != "" {
		t.Errorf("WithObject changed the input it was given")
	}
}
