package selfsigned

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/inplace-dev/inplace/webhook/certs"
)

// Certificates are a CA held in memory and the serving certificate it signs,
// written into Dir, where the webhook server reads (and watches) them.
// This is for clusters without cert-manager: the local cluster and tests,
// and kustomize's and Helm's installs without it. The CA lives ten years
// and is what the webhook configurations trust; the serving certificate is
// signed again before it expires (Renew), by the same CA, so the caBundle
// never changes while the process runs and the server picks up the new
// pair without a restart.
type Certificates struct {
	Dir   string
	Hosts []string
	// Lifetime of the serving certificate; 0 means a year.
	Lifetime time.Duration

	ca      *certs.CA
	expires time.Time
}

// New creates the CA and writes a first serving certificate.
func New(dir string, hosts []string, lifetime time.Duration) (*Certificates, error) {
	ca, err := certs.NewCA("inplace-webhook-ca")
	if err != nil {
		return nil, err
	}
	s := &Certificates{Dir: dir, Hosts: hosts, Lifetime: lifetime, ca: ca}
	if s.Lifetime <= 0 {
		s.Lifetime = 365 * 24 * time.Hour
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := writeAtomically(filepath.Join(dir, "ca.crt"), ca.PEM); err != nil {
		return nil, err
	}
	return s, s.sign()
}

// CA is the PEM of the CA, for the caBundle.
func (s *Certificates) CA() []byte { return s.ca.PEM }

// sign issues a serving certificate and writes it.
func (s *Certificates) sign() error {
	cert, key, err := s.ca.Sign(certs.Leaf{CommonName: s.Hosts[0], Hosts: s.Hosts, Lifetime: s.Lifetime})
	if err != nil {
		return err
	}
	// Each file is replaced whole (a rename), never seen half written. The
	// watcher may still see the new key beside the old certificate for a
	// moment; it refuses the mismatched pair and keeps serving the old one
	// until the certificate follows.
	for _, f := range []struct {
		name string
		data []byte
	}{{"tls.key", key}, {"tls.crt", cert}} {
		if err := writeAtomically(filepath.Join(s.Dir, f.name), f.data); err != nil {
			return err
		}
	}
	s.expires = time.Now().Add(s.Lifetime)
	return nil
}

// writeAtomically writes data to a temporary file beside path and renames
// it over path.
func writeAtomically(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename, nothing is left to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// renewAt is when the serving certificate is signed again: with a third
// of its life left, so that a failed attempt has time to be retried.
func (s *Certificates) renewAt() time.Time { return s.expires.Add(-s.Lifetime / 3) }

// Renew signs the serving certificate again whenever two thirds of its
// life have passed, until ctx ends.
func (s *Certificates) Renew(ctx context.Context) error {
	for {
		t := time.NewTimer(time.Until(s.renewAt()))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		if err := s.sign(); err != nil {
			// Retried after a minute; the certificate in place still has
			// a third of its life.
			log.FromContext(ctx).Error(err, "renewing the self-signed webhook certificate")
			s.expires = time.Now().Add(time.Minute + s.Lifetime/3)
		}
	}
}

// Only the two configurations inplace ships (their default names); a
// configuration renamed in the manager's config needs its name here too.
// make manifests writes this right into config/selfsigned (and Helm grants
// it without cert-manager only): with cert-manager, its cainjector writes
// the caBundle and the admission server needs no write to its own
// configurations.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,verbs=get;patch,resourceNames=inplace-mutating-webhook
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;patch,resourceNames=inplace-validating-webhook

// PatchCABundle sets caBundle on every webhook of the named mutating and
// validating configurations.
func PatchCABundle(ctx context.Context, c client.Client, ca []byte, mutating, validating string) error {
	var m admissionregistrationv1.MutatingWebhookConfiguration
	if err := patchConfiguration(ctx, c, mutating, &m, func() {
		for i := range m.Webhooks {
			m.Webhooks[i].ClientConfig.CABundle = ca
		}
	}); err != nil {
		return err
	}
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	return patchConfiguration(ctx, c, validating, &v, func() {
		for i := range v.Webhooks {
			v.Webhooks[i].ClientConfig.CABundle = ca
		}
	})
}

// patchConfiguration reads the webhook configuration name into obj, lets
// set change it, and patches the difference.
func patchConfiguration(ctx context.Context, c client.Client, name string, obj client.Object, set func()) error {
	if err := c.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
		return fmt.Errorf("webhook configuration %s: %w", name, err)
	}
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	set()
	if err := c.Patch(ctx, obj, patch); err != nil {
		return fmt.Errorf("patching caBundle of %s: %w", name, err)
	}
	return nil
}
