package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"os"
	"path/filepath"

	"github.com/inplace-dev/inplace/webhook/certs"
)

// pki is the set of keys and certificates one local cluster needs: a CA that
// signs the apiserver's serving certificate and the admin client certificate,
// and the key pair that signs service account tokens.
type pki struct {
	dir string

	caCert, caKey        string
	servingCert, servKey string
	adminCert, adminKey  string
	saPublic, saPrivate  string
	caPEM                []byte
	// ca signs the real nodes' client certificates.
	ca           *certs.CA
	adminCertPEM []byte
	adminKeyPEM  []byte
}

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir}
	ca, err := certs.NewCA("inplace-local-ca")
	if err != nil {
		return nil, err
	}
	p.caPEM = ca.PEM
	p.ca = ca
	caKey, err := certs.KeyPEM(ca.Key)
	if err != nil {
		return nil, err
	}
	servCert, servKey, err := ca.Sign(certs.Leaf{
		CommonName: "kube-apiserver",
		Hosts:      []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "127.0.0.1", serviceClusterFirstIP},
	})
	if err != nil {
		return nil, err
	}
	// system:masters is the group the apiserver authorizes for everything.
	if p.adminCertPEM, p.adminKeyPEM, err = ca.Sign(certs.Leaf{CommonName: "inplace-admin", Organization: []string{"system:masters"}, Client: true}); err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saPrivate, err := certs.KeyPEM(saKey)
	if err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		path *string
		name string
		data []byte
	}{
		{&p.caCert, "ca.crt", ca.PEM},
		{&p.caKey, "ca.key", caKey},
		{&p.servingCert, "apiserver.crt", servCert},
		{&p.servKey, "apiserver.key", servKey},
		{&p.adminCert, "admin.crt", p.adminCertPEM},
		{&p.adminKey, "admin.key", p.adminKeyPEM},
		{&p.saPrivate, "sa.key", saPrivate},
		{&p.saPublic, "sa.pub", certs.EncodePEM("PUBLIC KEY", pubDER)},
	} {
		*f.path = filepath.Join(dir, f.name)
		if err := os.WriteFile(*f.path, f.data, 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}
