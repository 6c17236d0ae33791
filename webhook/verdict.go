package webhook

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/policies"
)

// Names of the webhooks in config/webhook, which the API server puts in
// the text of their refusals.
const (
	MutatingWebhookName   = "mjobset.inplace.dev"
	ValidatingWebhookName = "vjobset.inplace.dev"
)

// DenialMessage is the validating webhook's answer to a JobSet its
// policies deny.
func DenialMessage(name string, denied []policies.Violation) string {
	return fmt.Sprintf("JobSet %s denied by %d policy violation(s): %s", name, len(denied), strings.Join(messagesOf(denied), "; "))
}

// Denial is the validating webhook's answer to a JobSet its policies
// deny, with DenialMessage. A JobSet a built-in policy finds invalid is
// refused as Invalid (422), as upstream JobSet's webhook and the API
// server's own validation refuse it: clients that test for
// apierrors.IsInvalid see what they would see upstream, and kubectl shows
// the causes, one per violation, each under the field its message starts
// with (an admin policy's cause named after its JobSetPolicy, so that
// nothing is lost from what kubectl shows). A JobSet only admin policies
// deny is valid, and the cluster forbids it: Forbidden (403), as
// Gatekeeper and Kyverno refuse.
func Denial(name string, denied []policies.Violation) admission.Response {
	msg := DenialMessage(name, denied)
	invalid := slices.ContainsFunc(denied, func(v policies.Violation) bool { return v.Builtin && !v.Failed })
	if !invalid {
		return admission.Denied(msg)
	}
	causes := make([]metav1.StatusCause, 0, len(denied))
	for _, v := range denied {
		field, rest := splitField(v.Message)
		c := metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: field, Message: rest}
		if !v.Builtin || v.Failed {
			c.Type, c.Message = metav1.CauseTypeForbidden, v.String()
		}
		causes = append(causes, c)
	}
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{
		Allowed: false,
		Result: &metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid, Message: msg,
			Details: &metav1.StatusDetails{Group: jobset.GroupVersion.Group, Kind: "JobSet", Name: name, Causes: causes},
		},
	}}
}

// splitField splits a policy's message into the field it starts with
// ("spec.x[0].y ..." or "metadata.name: ...") and the rest; no field,
// and the whole message, when it starts with none.
func splitField(msg string) (field, rest string) {
	if !strings.HasPrefix(msg, "spec.") && !strings.HasPrefix(msg, "metadata.") {
		return "", msg
	}
	end := strings.IndexAny(msg, " :")
	if end < 0 {
		return msg, msg
	}
	return msg[:end], strings.TrimLeft(msg[end:], ": ")
}

// Refusal is the text of the API server's error for a request a webhook
// denied with message.
func Refusal(webhookName, message string) string {
	return fmt.Sprintf("admission webhook %q denied the request: %s", webhookName, message)
}
