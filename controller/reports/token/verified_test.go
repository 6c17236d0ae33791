package token

import (
	"context"
	"crypto"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/google/go-cmp/cmp"
)

// countingKeys counts the signatures checked.
type countingKeys struct {
	keys   oidc.KeySet
	checks atomic.Int32
}

func (c *countingKeys) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	c.checks.Add(1)
	return c.keys.VerifySignature(ctx, jwt)
}

// A token that passed is not checked again until it expires; one that
// failed is checked every time.
func TestVerifyRemembersVerifiedTokens(t *testing.T) {
	key := newRSAKey(t, "rsa-1")
	keys := &countingKeys{keys: &oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{key.key.Public()}}}
	v := NewVerifierForKeys(testIssuer, testAudience, keys)
	now := time.Now()
	v.now = func() time.Time { return now }
	ctx := context.Background()

	good := key.sign(t, podClaims(now, testAudience))
	for i := range 3 {
		c, err := v.Verify(ctx, good)
		if err != nil {
			t.Fatalf("verify #%d: %v", i, err)
		}
		if diff := cmp.Diff(trainerClaims, c); diff != "" {
			t.Errorf("verify #%d claims (-want +got):\n%s", i, diff)
		}
	}
	if got := keys.checks.Load(); got != 1 {
		t.Errorf("three verifications of one token checked its signature %d times, want once", got)
	}

	other := key.sign(t, podClaims(now, "https://kubernetes.default.svc"))
	for i := range 2 {
		if _, err := v.Verify(ctx, other); err == nil {
			t.Fatalf("verify #%d of a token for another audience passed", i)
		}
	}
	if got := keys.checks.Load(); got != 3 {
		t.Errorf("two verifications of a refused token: %d signature checks in all, want 1 + 2 (a refusal is not remembered)", got)
	}

	// At its expiry the token is checked again (go-oidc's leeway for
	// clock skew may still pass it).
	now = now.Add(time.Hour)
	_, _ = v.Verify(ctx, good)
	if got := keys.checks.Load(); got != 4 {
		t.Errorf("a verification at the token's expiry: %d signature checks in all, want 4 (checked again)", got)
	}
}

// The tokens remembered stay bounded: expired ones go first, and a set
// full of live ones starts over.
func TestVerifiedIsBounded(t *testing.T) {
	var v verified
	now := time.Now()
	for i := range maxVerified {
		expiry := now.Add(time.Hour)
		if i%2 == 0 {
			expiry = now.Add(time.Minute)
		}
		v.put(fmt.Sprint(i), Claims{PodName: fmt.Sprint(i)}, expiry, now)
	}
	later := now.Add(2 * time.Minute)
	v.put("one more", Claims{PodName: "one more"}, later.Add(time.Hour), later)
	if got, want := v.len(), maxVerified/2+1; got != want {
		t.Errorf("after one more token past the bound with half expired: %d remembered, want %d", got, want)
	}
	if _, ok := v.get("1", later); !ok {
		t.Error("a live token was forgotten while expired ones made room")
	}
	for i := range maxVerified / 2 {
		v.put(fmt.Sprint("live-", i), Claims{}, later.Add(time.Hour), later)
	}
	if got := v.len(); got > maxVerified {
		t.Errorf("%d tokens remembered, bound %d", got, maxVerified)
	}
	if _, ok := v.get("expired", later); ok {
		t.Error("a token never verified was found")
	}
	v.put("already expired", Claims{}, later, later)
	if _, ok := v.get("already expired", later); ok {
		t.Error("a token past its expiry was remembered")
	}
}
