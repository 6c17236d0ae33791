package token

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Claims is what a verified agent token says of its bearer.
type Claims struct {
	Namespace      string
	ServiceAccount string
	PodName        string
	PodUID         types.UID
}

// signingAlgs are the algorithms the kube-apiserver signs service-account
// tokens with: RS256 for an RSA key, ES256, ES384 or ES512 for an ECDSA
// key of the matching curve. Anything else, "none" and the HMAC family
// above all, is refused before any key is tried.
var signingAlgs = []string{oidc.RS256, oidc.ES256, oidc.ES384, oidc.ES512}

var (
	errNotKubernetes = errors.New(`not a Kubernetes service-account token: no "kubernetes.io" claim`)
	errNotPodBound   = errors.New("not bound to a Pod: the token names no Pod (a legacy token, or one bound to a Secret or to nothing)")
	errNoAccount     = errors.New("names no namespace or service account")
	errSubject       = errors.New(`its subject is not the service account its "kubernetes.io" claim names`)
)

// Verifier verifies tokens locally against the cluster's service-account
// issuer keys.
type Verifier struct {
	issuer   string
	oidc     *oidc.IDTokenVerifier
	verified verified
	// keyKnown says whether the issuer still publishes a key id; nil for
	// a fixed key set (NewVerifierForKeys).
	keyKnown func(keyID string) bool
	now      func() time.Time
}

// NewVerifierForKeys returns a Verifier of tokens issued by issuer for
// audience and signed by one of keys, without discovery: for tests, with
// an oidc.StaticKeySet. An empty audience makes a Verifier that refuses
// every token.
func NewVerifierForKeys(issuer, audience string, keys oidc.KeySet) *Verifier {
	return newVerifier(issuer, audience, keys, signingAlgs, clock.RealClock{})
}

func newVerifier(issuer, audience string, keys oidc.KeySet, algs []string, clk clock.PassiveClock) *Verifier {
	return &Verifier{
		issuer: issuer,
		now:    clk.Now,
		// ClientID is the audience check: a token requested for another
		// audience (the API server's own, another service's) must not
		// pass here, or whoever holds it could replay it as an agent.
		// One clock for expiry here and in what is remembered.
		oidc: oidc.NewVerifier(issuer, keys, &oidc.Config{ClientID: audience, SupportedSigningAlgs: algs, Now: clk.Now}),
	}
}

// Issuer returns the discovered issuer.
func (v *Verifier) Issuer() string { return v.issuer }

// kubernetesClaims is the private claim the kube-apiserver writes into
// the tokens it issues through the TokenRequest API: whom the token is
// for and the object it is bound to.
type kubernetesClaims struct {
	Subject    string `json:"sub"`
	Kubernetes *struct {
		Namespace      string     `json:"namespace"`
		Pod            *objectRef `json:"pod"`
		ServiceAccount objectRef  `json:"serviceaccount"`
	} `json:"kubernetes.io"`
}

type objectRef struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// Verify checks signature, issuer, audience, expiry (and not-before), and
// that the token is bound to a Pod. It returns the claims, or an error
// that says which check failed. It calls the API server only to fetch the
// keys when the token names a key id it has not seen (at most once per
// keyRefetchInterval).
//
// It does not check that the Pod still exists: see the package comment.
// A token that passed is remembered until it expires, while the issuer
// publishes its key (verified).
func (v *Verifier) Verify(ctx context.Context, raw string) (Claims, error) {
	if c, ok := v.verified.get(raw, v.now(), v.keyKnown); ok {
		return c, nil
	}
	c, expiry, err := v.verify(ctx, raw)
	if err != nil {
		return Claims{}, err
	}
	v.verified.put(raw, c, expiry, v.now())
	return c, nil
}

func (v *Verifier) verify(ctx context.Context, raw string) (Claims, time.Time, error) {
	// go-oidc checks, in this order: the algorithm and the signature, the
	// issuer, the audience, expiry and not-before (with five minutes'
	// leeway for clock skew); its errors name the check that failed.
	tok, err := v.oidc.Verify(ctx, raw)
	if err != nil {
		return Claims{}, time.Time{}, fmt.Errorf("service-account token refused: %w", err)
	}
	var kc kubernetesClaims
	if err := tok.Claims(&kc); err != nil {
		return Claims{}, time.Time{}, fmt.Errorf("service-account token refused: reading its claims: %w", err)
	}
	k := kc.Kubernetes
	switch {
	case k == nil:
		return Claims{}, time.Time{}, fmt.Errorf("service-account token refused: %w", errNotKubernetes)
	case k.Pod == nil || k.Pod.Name == "" || k.Pod.UID == "":
		// Only a Pod-bound token ties the report to one Pod: a token
		// bound to nothing or to a Secret stays valid wherever it is
		// copied, as long as its service account exists.
		return Claims{}, time.Time{}, fmt.Errorf("service-account token refused: %w", errNotPodBound)
	case k.Namespace == "" || k.ServiceAccount.Name == "":
		return Claims{}, time.Time{}, fmt.Errorf("service-account token refused: %w", errNoAccount)
	case kc.Subject != serviceAccountUsername(k.Namespace, k.ServiceAccount.Name):
		// The API server writes both from the same service account; a
		// disagreement means the token is not one it issued as such.
		return Claims{}, time.Time{}, fmt.Errorf("service-account token refused: %w", errSubject)
	}
	return Claims{
		Namespace:      k.Namespace,
		ServiceAccount: k.ServiceAccount.Name,
		PodName:        k.Pod.Name,
		PodUID:         types.UID(k.Pod.UID),
	}, tok.Expiry, nil
}

// serviceAccountUsername is the user name, and the token subject, of a
// service account (k8s.io/apiserver's serviceaccount.MakeUsername, which
// would bring the apiserver's authentication packages into the manager for
// one line).
func serviceAccountUsername(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}
