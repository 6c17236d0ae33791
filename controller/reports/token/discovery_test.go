package token

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
)

const managerToken = "manager-token"

// apiServer serves the two discovery documents as the kube-apiserver does,
// to the manager's bearer token only, and counts the key-set reads.
type apiServer struct {
	*httptest.Server

	mu        sync.Mutex
	keys      []jose.JSONWebKey
	keyReads  int
	forbidden bool
}

func newAPIServer(t *testing.T, keys ...signingKey) *apiServer {
	t.Helper()
	s := &apiServer{}
	s.setKeys(keys...)
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+discoveryPath, func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(w, r) {
			return
		}
		writeJSON(w, "application/json", map[string]any{
			"issuer": testIssuer,
			// The issuer's public address, which the manager cannot
			// reach: read from there, and every key fetch fails.
			"jwks_uri":                              "https://127.0.0.1:1" + keySetPath,
			"response_types_supported":              []string{"id_token"},
			"subject_types_supported":               []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256"},
		})
	})
	mux.HandleFunc("GET "+keySetPath, func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(w, r) {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		// As the API server negotiates: the key set is
		// application/jwk-set+json only.
		if accept := r.Header.Get("Accept"); accept != "" && !strings.Contains(accept, keySetType) && !strings.Contains(accept, "*/*") {
			http.Error(w, "406: Not Acceptable\n\nAvailable representations: "+keySetType, http.StatusNotAcceptable)
			return
		}
		s.keyReads++
		writeJSON(w, keySetType, jose.JSONWebKeySet{Keys: s.keys})
	})
	s.Server = httptest.NewTLSServer(mux)
	t.Cleanup(s.Close)
	return s
}

func (s *apiServer) authorized(w http.ResponseWriter, r *http.Request) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case r.Header.Get("Authorization") != "Bearer "+managerToken:
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
	case s.forbidden:
		http.Error(w, `forbidden: User "system:serviceaccount:inplace-system:inplace-manager" cannot get path "`+r.URL.Path+`"`, http.StatusForbidden)
	default:
		return true
	}
	return false
}

func (s *apiServer) setKeys(keys ...signingKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = nil
	for _, k := range keys {
		s.keys = append(s.keys, k.public())
	}
}

func (s *apiServer) reads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keyReads
}

// config is the manager's rest.Config for s: its CA and its token.
func (s *apiServer) config() *rest.Config {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	return &rest.Config{Host: s.URL, BearerToken: managerToken, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
}

func writeJSON(w http.ResponseWriter, contentType string, v any) {
	w.Header().Set("Content-Type", contentType)
	_ = json.NewEncoder(w).Encode(v)
}

func TestNewVerifierDiscoversThroughTheAPIServer(t *testing.T) {
	ctx := context.Background()
	keyA, keyB := newRSAKey(t, "A"), newECDSAKey(t, "B")
	srv := newAPIServer(t, keyA)
	clk := clocktesting.NewFakePassiveClock(time.Now())

	v, err := discover(ctx, srv.config(), testAudience, clk)
	if err != nil {
		t.Fatalf("discover() error = %v", err)
	}
	if v.Issuer() != testIssuer {
		t.Errorf("Issuer() = %q, want %q", v.Issuer(), testIssuer)
	}
	verify := func(key signingKey) error {
		t.Helper()
		got, err := v.Verify(ctx, key.sign(t, podClaims(time.Now(), testAudience)))
		if err == nil {
			if diff := cmp.Diff(trainerClaims, got); diff != "" {
				t.Errorf("Verify() claims (-want +got):\n%s", diff)
			}
		}
		return err
	}

	// The keys were read once, from the API server's path (jwks_uri
	// refuses connections), and that read serves the first tokens.
	if err := verify(keyA); err != nil {
		t.Fatalf("a token signed with key A: %v", err)
	}
	// One token of key A, verified now and so remembered, is presented
	// again once key A is retired.
	rawA := keyA.sign(t, podClaims(time.Now(), testAudience))
	if _, err := v.Verify(ctx, rawA); err != nil {
		t.Fatalf("a token signed with key A: %v", err)
	}
	if n := srv.reads(); n != 1 {
		t.Errorf("key set read %d times, want 1", n)
	}

	// The API server rotates to key B. Within the refetch interval, the
	// unknown key id costs it nothing, however many tokens name it.
	srv.setKeys(keyB)
	for range 20 {
		if err := verify(keyB); err == nil || !strings.Contains(err.Error(), "failed to verify signature") {
			t.Fatalf("a token signed with key B, before the refetch interval passed: error = %v, want a signature failure", err)
		}
	}
	if n := srv.reads(); n != 1 {
		t.Errorf("key set read %d times within the refetch interval, want 1", n)
	}

	// Once it has passed, the next token with key B refetches, and
	// verifies; key A is no longer served.
	clk.SetTime(clk.Now().Add(keyRefetchInterval))
	// go-oidc may hand a token the answer of a fetch of its own that began
	// before the interval passed: it joins a fetch in flight, and clears
	// it only after waking its waiters. Wait until a token is verified
	// with the refetched keys; the refetch itself is counted below.
	err = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return verify(keyB) == nil, nil
	})
	if err != nil {
		t.Fatalf("a token signed with key B, after the refetch interval: %v (last: %v)", err, verify(keyB))
	}
	if n := srv.reads(); n != 2 {
		t.Errorf("key set read %d times, want 2", n)
	}
	// Cached now: no read for a known key id.
	if err := verify(keyB); err != nil {
		t.Fatalf("a second token signed with key B: %v", err)
	}
	if n := srv.reads(); n != 2 {
		t.Errorf("key set read %d times for a cached key, want 2", n)
	}
	clk.SetTime(clk.Now().Add(keyRefetchInterval))
	// go-oidc swaps its cached keys after it has woken the callers of a
	// fetch: on a busy machine a check may still find key A there for a
	// moment. Wait until key A is refused, fresh and remembered alike.
	refused := func(check func() error) error {
		var last error
		err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			last = check()
			return last != nil && strings.Contains(last.Error(), "failed to verify signature"), nil
		})
		if err != nil {
			return fmt.Errorf("%w (last: %w)", err, last)
		}
		return nil
	}
	if err := refused(func() error { return verify(keyA) }); err != nil {
		t.Errorf("a token signed with the retired key A, want a signature failure: %v", err)
	}
	if err := refused(func() error { _, err := v.Verify(ctx, rawA); return err }); err != nil {
		t.Errorf("a token of the retired key A remembered before it was retired, want a signature failure: %v", err)
	}
}

func TestNewVerifierRefuses(t *testing.T) {
	key := newRSAKey(t, "A")
	cases := map[string]struct {
		// setup
		audience string
		edit     func(*apiServer, *rest.Config)
		// want
		wantErr string
	}{
		"without an audience": {
			wantErr: "an audience is required",
		},
		"without the manager's credentials": {
			audience: testAudience,
			edit:     func(_ *apiServer, cfg *rest.Config) { cfg.BearerToken = "" },
			wantErr:  "401 Unauthorized",
		},
		"without the right to read the discovery documents": {
			audience: testAudience,
			edit:     func(s *apiServer, _ *rest.Config) { s.forbidden = true },
			wantErr:  "403 Forbidden",
		},
		"when the API server serves no keys": {
			audience: testAudience,
			edit:     func(s *apiServer, _ *rest.Config) { s.setKeys() },
			wantErr:  "serves no service-account keys",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			srv := newAPIServer(t, key)
			cfg := srv.config()
			if tc.edit != nil {
				tc.edit(srv, cfg)
			}
			_, err := NewVerifier(context.Background(), cfg, tc.audience)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("NewVerifier() error = %v, want one saying %q", err, tc.wantErr)
			}
		})
	}
}
