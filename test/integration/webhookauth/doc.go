// Package webhookauth tests the webhooks with TLS client authentication:
// the apiserver presents a client certificate, as its admission
// configuration tells it to, and the webhook server serves nobody else.
//
// Test code: it imports the harness (test/framework) and any package of the
// module; nothing imports it.
package webhookauth
