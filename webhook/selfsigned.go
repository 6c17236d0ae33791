package webhook

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inplace-dev/inplace/webhook/certs"
)

// WriteSelfSignedCerts creates a CA and a serving certificate for hosts and
// writes tls.crt, tls.key and ca.crt into dir, where the webhook server
// reads (and watches) them. It returns the CA for the caBundle. This is for
// clusters without cert-manager: the local cluster and tests.
func WriteSelfSignedCerts(dir string, hosts []string) ([]byte, error) {
	ca, err := certs.NewCA("inplace-webhook-ca")
	if err != nil {
		return nil, err
	}
	cert, key, err := ca.Sign(certs.Leaf{CommonName: hosts[0], Hosts: hosts})
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// The key is written before the certificate so that a watcher never
	// pairs the new certificate with the old key.
	for _, f := range []struct {
		name string
		data []byte
	}{{"ca.crt", ca.PEM}, {"tls.key", key}, {"tls.crt", cert}} {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, 0o600); err != nil {
			return nil, err
		}
	}
	return ca.PEM, nil
}

// Only the two configurations inplace ships (their default names); a
// configuration renamed in the manager's config needs its name here too.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=get;patch,resourceNames=inplace-mutating-webhook;inplace-validating-webhook

// PatchCABundle sets caBundle on every webhook of the named mutating and
// validating configurations.
func PatchCABundle(ctx context.Context, c client.Client, ca []byte, mutating, validating string) error {
	var m admissionregistrationv1.MutatingWebhookConfiguration
	if err := c.Get(ctx, client.ObjectKey{Name: mutating}, &m); err != nil {
		return fmt.Errorf("mutating webhook configuration %s: %w", mutating, err)
	}
	patch := client.MergeFrom(m.DeepCopy())
	for i := range m.Webhooks {
		m.Webhooks[i].ClientConfig.CABundle = ca
	}
	if err := c.Patch(ctx, &m, patch); err != nil {
		return fmt.Errorf("patching caBundle of %s: %w", mutating, err)
	}
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	if err := c.Get(ctx, client.ObjectKey{Name: validating}, &v); err != nil {
		return fmt.Errorf("validating webhook configuration %s: %w", validating, err)
	}
	vpatch := client.MergeFrom(v.DeepCopy())
	for i := range v.Webhooks {
		v.Webhooks[i].ClientConfig.CABundle = ca
	}
	if err := c.Patch(ctx, &v, vpatch); err != nil {
		return fmt.Errorf("patching caBundle of %s: %w", validating, err)
	}
	return nil
}
