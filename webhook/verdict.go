package webhook

import (
	"fmt"
	"strings"

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

// Refusal is the text of the API server's error for a request a webhook
// denied with message.
func Refusal(webhookName, message string) string {
	return fmt.Sprintf("admission webhook %q denied the request: %s", webhookName, message)
}
