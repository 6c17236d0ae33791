package token

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/google/go-cmp/cmp"
)

const (
	testIssuer   = "https://kubernetes.default.svc.cluster.local"
	testAudience = "inplace.dev/agent-reports"
)

// signingKey is a private key with the id and algorithm the issuer
// publishes it under.
type signingKey struct {
	id  string
	alg jose.SignatureAlgorithm
	key crypto.Signer
}

func newRSAKey(t *testing.T, id string) signingKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{id: id, alg: jose.RS256, key: k}
}

func newECDSAKey(t *testing.T, id string) signingKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{id: id, alg: jose.ES256, key: k}
}

// public is the key as the API server's /openid/v1/jwks lists it.
func (k signingKey) public() jose.JSONWebKey {
	return jose.JSONWebKey{Key: k.key.Public(), KeyID: k.id, Algorithm: string(k.alg), Use: "sig"}
}

// sign signs claims as the kube-apiserver signs a service-account token:
// a compact JWS with the key's id in its header.
func (k signingKey) sign(t *testing.T, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: jose.JSONWebKey{Key: k.key, KeyID: k.id}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// podClaims are the claims of a token the kube-apiserver issues through
// the TokenRequest API for service account ns/sa, bound to a Pod, for
// audiences, valid from now for an hour.
func podClaims(now time.Time, audiences ...string) map[string]any {
	return map[string]any{
		"iss": testIssuer,
		"aud": audiences,
		"sub": "system:serviceaccount:team-a:trainer",
		"iat": now.Unix(),
		"nbf": now.Unix(),
		"exp": now.Add(time.Hour).Unix(),
		"jti": "4b5c1f0e-0d6b-4f4c-9a55-1f1a4f0e2a11",
		"kubernetes.io": map[string]any{
			"namespace":      "team-a",
			"pod":            map[string]any{"name": "train-w-0-0-x7k2p", "uid": "0b7c2d84-5e51-4a4b-a1f4-3c0d9a8f7e61"},
			"serviceaccount": map[string]any{"name": "trainer", "uid": "9e1f6c3a-2b0d-4f8e-8c7a-5d4e3f2a1b09"},
		},
	}
}

var trainerClaims = Claims{Namespace: "team-a", ServiceAccount: "trainer", PodName: "train-w-0-0-x7k2p", PodUID: "0b7c2d84-5e51-4a4b-a1f4-3c0d9a8f7e61"}

// kubernetesIO returns the kubernetes.io claim of claims, to edit.
func kubernetesIO(claims map[string]any) map[string]any {
	return claims["kubernetes.io"].(map[string]any)
}

func TestVerify(t *testing.T) {
	rsaKey, ecKey, otherKey := newRSAKey(t, "rsa-1"), newECDSAKey(t, "ec-1"), newRSAKey(t, "rsa-1")
	keys := &oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{rsaKey.key.Public(), ecKey.key.Public()}}
	now := time.Now()

	cases := map[string]struct {
		// setup: the token's claims are podClaims(now, testAudience)
		// edited by edit, signed by key (rsaKey if unset); raw, if set,
		// is the token instead.
		edit func(map[string]any)
		key  *signingKey
		raw  func() string
		// want
		claims  Claims
		wantErr string
	}{
		"a Pod-bound token for the reports' audience": {
			claims: trainerClaims,
		},
		"among other audiences": {
			edit:   func(c map[string]any) { c["aud"] = []string{"https://kubernetes.default.svc", testAudience} },
			claims: trainerClaims,
		},
		"signed with the issuer's ECDSA key": {
			key:    &ecKey,
			claims: trainerClaims,
		},
		"bound to a Pod on a node": {
			edit: func(c map[string]any) {
				kubernetesIO(c)["node"] = map[string]any{"name": "gpu-node-3", "uid": "77e0b1c2-9f3d-4e2a-8b1c-0d2e3f4a5b6c"}
			},
			claims: trainerClaims,
		},
		"for the API server's audience": {
			edit:    func(c map[string]any) { c["aud"] = []string{"https://kubernetes.default.svc"} },
			wantErr: `expected audience "inplace.dev/agent-reports"`,
		},
		"with no audience": {
			edit:    func(c map[string]any) { delete(c, "aud") },
			wantErr: "expected audience",
		},
		"expired": {
			edit: func(c map[string]any) {
				c["iat"], c["nbf"], c["exp"] = now.Add(-2*time.Hour).Unix(), now.Add(-2*time.Hour).Unix(), now.Add(-time.Minute).Unix()
			},
			wantErr: "token is expired",
		},
		"not valid before an hour from now": {
			edit:    func(c map[string]any) { c["nbf"], c["exp"] = now.Add(time.Hour).Unix(), now.Add(2*time.Hour).Unix() },
			wantErr: "before the nbf",
		},
		"from another issuer": {
			edit:    func(c map[string]any) { c["iss"] = "https://oidc.example.com" },
			wantErr: "issued by a different provider",
		},
		"signed with another key of the same id": {
			key:     &otherKey,
			wantErr: "failed to verify signature",
		},
		"bound to a Secret": {
			edit: func(c map[string]any) {
				k := kubernetesIO(c)
				delete(k, "pod")
				k["secret"] = map[string]any{"name": "trainer-token", "uid": "5a6b7c8d-1e2f-4a3b-9c0d-e1f2a3b4c5d6"}
			},
			wantErr: "not bound to a Pod",
		},
		"bound to nothing": {
			edit:    func(c map[string]any) { delete(kubernetesIO(c), "pod") },
			wantErr: "not bound to a Pod",
		},
		"bound to a Pod without a UID": {
			edit:    func(c map[string]any) { kubernetesIO(c)["pod"] = map[string]any{"name": "train-w-0-0-x7k2p"} },
			wantErr: "not bound to a Pod",
		},
		"without the kubernetes.io claim": {
			edit:    func(c map[string]any) { delete(c, "kubernetes.io") },
			wantErr: "not a Kubernetes service-account token",
		},
		"naming no service account": {
			edit:    func(c map[string]any) { delete(kubernetesIO(c), "serviceaccount") },
			wantErr: "names no namespace or service account",
		},
		"whose subject is another service account": {
			edit:    func(c map[string]any) { c["sub"] = "system:serviceaccount:team-a:admin" },
			wantErr: "subject is not the service account",
		},
		"a legacy Secret token": {
			// What the token controller wrote into Secrets of type
			// kubernetes.io/service-account-token: another issuer, no
			// audience, no expiry, flat claims.
			edit: func(c map[string]any) {
				for _, k := range []string{"aud", "exp", "iat", "nbf", "jti", "kubernetes.io"} {
					delete(c, k)
				}
				c["iss"] = "kubernetes/serviceaccount"
				c["kubernetes.io/serviceaccount/namespace"] = "team-a"
				c["kubernetes.io/serviceaccount/service-account.name"] = "trainer"
			},
			wantErr: "issued by a different provider",
		},
		"malformed": {
			raw:     func() string { return "not.a.jwt" },
			wantErr: "malformed jwt",
		},
		"empty": {
			raw:     func() string { return "" },
			wantErr: "malformed jwt",
		},
		"unsigned (alg none)": {
			raw: func() string {
				enc := base64.RawURLEncoding.EncodeToString
				payload, _ := json.Marshal(podClaims(now, testAudience))
				return enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc(payload) + "."
			},
			wantErr: "malformed jwt",
		},
		"HMAC-signed with the public key as secret": {
			raw: func() string {
				der, err := x509.MarshalPKIXPublicKey(rsaKey.key.Public())
				if err != nil {
					t.Fatal(err)
				}
				signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: der}, nil)
				if err != nil {
					t.Fatal(err)
				}
				payload, _ := json.Marshal(podClaims(now, testAudience))
				jws, err := signer.Sign(payload)
				if err != nil {
					t.Fatal(err)
				}
				raw, _ := jws.CompactSerialize()
				return raw
			},
			wantErr: "malformed jwt",
		},
	}
	v := NewVerifierForKeys(testIssuer, testAudience, keys)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var raw string
			if tc.raw != nil {
				raw = tc.raw()
			} else {
				claims := podClaims(now, testAudience)
				if tc.edit != nil {
					tc.edit(claims)
				}
				key := rsaKey
				if tc.key != nil {
					key = *tc.key
				}
				raw = key.sign(t, claims)
			}
			got, err := v.Verify(context.Background(), raw)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Verify() error = %v, want one saying %q", err, tc.wantErr)
				}
				if got != (Claims{}) {
					t.Errorf("Verify() refused the token but returned claims %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Verify() error = %v", err)
			}
			if diff := cmp.Diff(tc.claims, got); diff != "" {
				t.Errorf("Verify() claims (-want +got):\n%s", diff)
			}
		})
	}
}

// A Verifier built without an audience would pass tokens for any
// audience if go-oidc skipped the check; it refuses all of them.
func TestVerifyWithoutAudienceRefusesAll(t *testing.T) {
	key := newRSAKey(t, "rsa-1")
	v := NewVerifierForKeys(testIssuer, "", &oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{key.key.Public()}})
	for _, aud := range []string{testAudience, ""} {
		if _, err := v.Verify(context.Background(), key.sign(t, podClaims(time.Now(), aud))); err == nil {
			t.Errorf("a token for audience %q was accepted by a Verifier without an audience", aud)
		}
	}
}
