package webhook

import (
	"net/http"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/inplace-dev/inplace/policies"
)

func TestDenial(t *testing.T) {
	invalid := policies.Violation{Policy: "names", Builtin: true, Message: `metadata.name "train.v2" contains '.': use '-' instead of '.'`}
	endpoint := policies.Violation{Policy: "startup_policy", Builtin: true, Message: "spec.coordinator: the coordinator endpoint is too long"}
	forbidden := policies.Violation{Policy: "max-restarts", Message: "spec.failurePolicy.maxRestarts is 11, above this cluster's limit of 10"}
	failed := policies.Violation{Policy: "names", Builtin: true, Failed: true, Message: "evaluation failed"}

	for name, tc := range map[string]struct {
		denied     []policies.Violation
		code       int32
		reason     metav1.StatusReason
		causeField []string
		causeText  []string
	}{
		"built-ins: Invalid, a cause per message naming its field": {
			denied: []policies.Violation{invalid, endpoint}, code: http.StatusUnprocessableEntity, reason: metav1.StatusReasonInvalid,
			causeField: []string{"metadata.name", "spec.coordinator"},
			causeText:  []string{`"train.v2" contains '.': use '-' instead of '.'`, "the coordinator endpoint is too long"},
		},
		"a built-in beside an admin policy: Invalid, the admin policy's message a cause too, with its name": {
			denied: []policies.Violation{forbidden, invalid}, code: http.StatusUnprocessableEntity, reason: metav1.StatusReasonInvalid,
			causeField: []string{"spec.failurePolicy.maxRestarts", "metadata.name"},
			causeText:  []string{"max-restarts: spec.failurePolicy.maxRestarts is 11, above this cluster's limit of 10", `"train.v2" contains '.': use '-' instead of '.'`},
		},
		"admin policies alone: Forbidden": {
			denied: []policies.Violation{forbidden}, code: http.StatusForbidden, reason: metav1.StatusReasonForbidden,
		},
		"a built-in whose evaluation failed: Forbidden, nothing said of the JobSet": {
			denied: []policies.Violation{failed}, code: http.StatusForbidden, reason: metav1.StatusReasonForbidden,
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := Denial("train", tc.denied)
			if r.Allowed || r.Result == nil {
				t.Fatalf("Denial allowed the request: %+v", r)
			}
			if r.Result.Code != tc.code || r.Result.Reason != tc.reason {
				t.Errorf("code %d, reason %q; want %d, %q", r.Result.Code, r.Result.Reason, tc.code, tc.reason)
			}
			if want := DenialMessage("train", tc.denied); r.Result.Message != want {
				t.Errorf("message %q, want %q", r.Result.Message, want)
			}
			var fields, texts []string
			if d := r.Result.Details; d != nil {
				if d.Kind != "JobSet" || d.Group != "jobset.x-k8s.io" || d.Name != "train" {
					t.Errorf("details name %s %s/%s, want JobSet jobset.x-k8s.io/train", d.Kind, d.Group, d.Name)
				}
				for _, c := range d.Causes {
					fields, texts = append(fields, c.Field), append(texts, c.Message)
				}
			}
			if !slices.Equal(fields, tc.causeField) || !slices.Equal(texts, tc.causeText) {
				t.Errorf("causes %q: %q; want %q: %q", fields, texts, tc.causeField, tc.causeText)
			}
		})
	}
}
