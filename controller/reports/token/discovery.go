package token

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

const (
	// The API server's service-account issuer discovery endpoints
	// (ServiceAccountIssuerDiscovery, GA since Kubernetes 1.21).
	discoveryPath = "/.well-known/openid-configuration"
	keySetPath    = "/openid/v1/jwks"
	// keySetType is the only media type the API server serves the key set
	// as: asked for application/json, it answers 406.
	keySetType = "application/jwk-set+json"

	// fetchTimeout bounds one read of either document when cfg sets no
	// timeout: go-oidc fetches keys on a context that is never cancelled,
	// and a fetch that hangs would hold up every token naming a new key.
	fetchTimeout = 30 * time.Second
)

// NewVerifier discovers the issuer through the API server cfg points at,
// from its OIDC discovery document, and builds a key set that reads the
// API server's /openid/v1/jwks through cfg's transport and credentials.
// It reads the key set once before it returns, so that a manager that may
// not read it (RBAC) or an API server that serves no keys fails at start
// rather than at each report. audience is required.
func NewVerifier(ctx context.Context, cfg *rest.Config, audience string) (*Verifier, error) {
	return discover(ctx, cfg, audience, clock.RealClock{})
}

func discover(ctx context.Context, cfg *rest.Config, audience string, clk clock.PassiveClock) (*Verifier, error) {
	if audience == "" {
		return nil, errors.New("token verifier: an audience is required: without one, a token the cluster issued for any purpose would pass")
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("token verifier: %w", err)
	}
	if client.Timeout == 0 {
		client.Timeout = fetchTimeout
	}
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("token verifier: %w", err)
	}

	// Its jwks_uri is left unread: see the package comment.
	var doc struct {
		Issuer string   `json:"issuer"`
		Algs   []string `json:"id_token_signing_alg_values_supported"`
	}
	if err := getJSON(ctx, client, base.JoinPath(discoveryPath), "application/json", &doc); err != nil {
		return nil, fmt.Errorf("token verifier: discovering the service-account issuer: %w", err)
	}
	if doc.Issuer == "" {
		return nil, fmt.Errorf("token verifier: the discovery document at %s names no issuer", discoveryPath)
	}
	algs := supportedAlgs(doc.Algs)
	if len(algs) == 0 {
		return nil, fmt.Errorf("token verifier: the issuer signs with %v, none of which is %v", doc.Algs, signingAlgs)
	}

	keysURL := base.JoinPath(keySetPath)
	fetches := newKeyFetches(client.Transport, keyRefetchInterval, clk)
	keysClient := &http.Client{Transport: fetches, Timeout: client.Timeout}
	// Through keysClient, so that go-oidc's first fetch, at the first
	// token, is answered with this read's keys.
	var keys struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := getJSON(ctx, keysClient, keysURL, keySetType, &keys); err != nil {
		return nil, fmt.Errorf("token verifier: reading the service-account issuer's keys: %w", err)
	}
	if len(keys.Keys) == 0 {
		return nil, fmt.Errorf("token verifier: the API server serves no service-account keys at %s", keySetPath)
	}
	keySet := oidc.NewRemoteKeySet(oidc.ClientContext(ctx, keysClient), keysURL.String())
	v := newVerifier(doc.Issuer, audience, keySet, algs, clk)
	// A key retired from the set retires the tokens it verified.
	v.keyKnown = fetches.keyKnown
	return v, nil
}

// supportedAlgs is what the issuer says it signs with, of signingAlgs;
// all of signingAlgs if it does not say.
func supportedAlgs(advertised []string) []string {
	if len(advertised) == 0 {
		return signingAlgs
	}
	var algs []string
	for _, a := range advertised {
		if slices.Contains(signingAlgs, a) {
			algs = append(algs, a)
		}
	}
	return algs
}

// getJSON reads a JSON document of media type accept from u into v.
func getJSON(ctx context.Context, client *http.Client, u *url.URL, accept string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", accept)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKeySetBytes))
	if err != nil {
		return fmt.Errorf("GET %s: %w", u.Path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", u.Path, resp.Status, truncate(body, 256))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: %w", u.Path, err)
	}
	return nil
}

// truncate keeps error messages readable when the API server (or a proxy
// in front of it) answers with a page of HTML.
func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
