package selfsigned

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// The serving certificate is signed again before it expires, by the same
// CA, and the webhook server's certificate watcher serves the new one: no
// restart, no new caBundle.
func TestSelfSignedServingCertificateIsRenewed(t *testing.T) {
	dir := t.TempDir()
	s, err := New(dir, []string{"127.0.0.1"}, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	watcher, err := certwatcher.New(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = watcher.Start(ctx) }()
	first, err := watcher.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	renewed := make(chan error, 1)
	go func() { renewed <- s.Renew(ctx) }()

	deadline := time.Now().Add(30 * time.Second)
	for {
		cur, err := watcher.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(cur.Certificate[0], first.Certificate[0]) {
			leaf, err := x509.ParseCertificate(cur.Certificate[0])
			if err != nil {
				t.Fatal(err)
			}
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(s.CA())
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool}); err != nil {
				t.Errorf("the renewed certificate does not chain to the CA the webhooks trust: %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the serving certificate was not renewed within 30s of a 3s lifetime")
		}
		time.Sleep(50 * time.Millisecond) // polling the watcher, bounded by the deadline
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if block, _ := pem.Decode(ca); block == nil || !bytes.Equal(ca, s.CA()) {
		t.Error("the CA changed with the renewal")
	}
	cancel()
	if err := <-renewed; err != nil {
		t.Errorf("Renew: %v", err)
	}
}
