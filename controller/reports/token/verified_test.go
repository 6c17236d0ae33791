package token

import (
	"context"
	"crypto"
	"encoding/base64"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

// switchableKeys is a key set the test can change, counting the
// signatures checked.
type switchableKeys struct {
	mu     sync.Mutex
	keys   oidc.KeySet
	checks atomic.Int32
}

func (s *switchableKeys) set(keys oidc.KeySet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = keys
}

func (s *switchableKeys) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	s.checks.Add(1)
	s.mu.Lock()
	keys := s.keys
	s.mu.Unlock()
	return keys.VerifySignature(ctx, jwt)
}

// A token that passed is not checked again until it expires; one that
// failed is checked every time; one past its expiry is checked, and
// refused.
func TestVerifyRemembersVerifiedTokens(t *testing.T) {
	key := newRSAKey(t, "rsa-1")
	keys := &switchableKeys{keys: &oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{key.key.Public()}}}
	clk := clocktesting.NewFakePassiveClock(time.Now())
	v := newVerifier(testIssuer, testAudience, keys, signingAlgs, clk)
	ctx := context.Background()

	good := key.sign(t, podClaims(clk.Now(), testAudience))
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

	other := key.sign(t, podClaims(clk.Now(), "https://kubernetes.default.svc"))
	for i := range 2 {
		if _, err := v.Verify(ctx, other); err == nil {
			t.Fatalf("verify #%d of a token for another audience passed", i)
		}
	}
	if got := keys.checks.Load(); got != 3 {
		t.Errorf("two verifications of a refused token: %d signature checks in all, want 1 + 2 (a refusal is not remembered)", got)
	}

	clk.SetTime(clk.Now().Add(time.Hour + time.Second))
	if _, err := v.Verify(ctx, good); err == nil {
		t.Error("a token past its expiry passed")
	}
	if got := keys.checks.Load(); got != 4 {
		t.Errorf("a verification past the token's expiry: %d signature checks in all, want 4 (checked again)", got)
	}
}

// A token remembered is refused once the issuer no longer publishes its
// key, including one remembered after the key was retired (a check that
// began with the old keys).
func TestVerifyForgetsTokensOfARetiredKey(t *testing.T) {
	key := newRSAKey(t, "rsa-1")
	keys := &switchableKeys{keys: &oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{key.key.Public()}}}
	clk := clocktesting.NewFakePassiveClock(time.Now())
	v := newVerifier(testIssuer, testAudience, keys, signingAlgs, clk)
	var published atomic.Bool
	published.Store(true)
	v.keyKnown = func(id string) bool { return id == "rsa-1" && published.Load() }
	ctx := context.Background()

	raw := key.sign(t, podClaims(clk.Now(), testAudience))
	if _, err := v.Verify(ctx, raw); err != nil {
		t.Fatal(err)
	}
	// The issuer retires the key: its set no longer lists it.
	published.Store(false)
	keys.set(&oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{newRSAKey(t, "rsa-2").key.Public()}})
	if _, err := v.Verify(ctx, raw); err == nil {
		t.Error("a token remembered before its key was retired passed after")
	}
	// A check that began before the retirement stores its token after it.
	v.verified.put(raw, trainerClaims, clk.Now().Add(time.Hour), clk.Now())
	if _, err := v.Verify(ctx, raw); err == nil {
		t.Error("a token remembered after its key was retired passed")
	}
}

// fakeToken is a compact JWS's shape with a header naming keyID; its
// signature is not checked by verified, which only remembers.
func fakeToken(keyID string, n int) string {
	header := base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, `{"alg":"RS256","kid":%q}`, keyID))
	return fmt.Sprintf("%s.%d.sig", header, n)
}

// The tokens remembered stay bounded, and a full set keeps what it
// holds: tokens minted to fill it push no agent's out. Expired ones make
// room at the next sweep.
func TestVerifiedIsBounded(t *testing.T) {
	var v verified
	now := time.Now()
	for i := range maxVerified {
		expiry := now.Add(time.Hour)
		if i%2 == 0 {
			expiry = now.Add(time.Minute)
		}
		v.put(fakeToken("k", i), Claims{PodName: fmt.Sprint(i)}, expiry, now)
	}
	if got := remembered(&v); got != maxVerified {
		t.Fatalf("%d tokens remembered of %d put, want all", got, maxVerified)
	}
	v.put(fakeToken("k", -1), Claims{}, now.Add(time.Hour), now)
	if _, ok := v.get(fakeToken("k", -1), now, nil); ok {
		t.Error("a full set of live tokens took one more")
	}
	if _, ok := v.get(fakeToken("k", 1), now, nil); !ok {
		t.Error("a full set forgot a live token to take another")
	}

	later := now.Add(2 * time.Minute)
	v.put(fakeToken("k", -2), Claims{PodName: "after the sweep"}, later.Add(time.Hour), later)
	if got, want := remembered(&v), maxVerified/2+1; got != want {
		t.Errorf("after a sweep with half expired: %d remembered, want %d", got, want)
	}
	if c, ok := v.get(fakeToken("k", -2), later, nil); !ok || c.PodName != "after the sweep" {
		t.Error("the token put after the sweep was not remembered")
	}
	if _, ok := v.get(fakeToken("k", 1), later, nil); !ok {
		t.Error("a live token was forgotten while expired ones made room")
	}
}

// What is not remembered: a token already expired, one whose header
// names no key; and one that claims to expire later than maxRemembered
// is forgotten then.
func TestVerifiedRemembersOnlyWhatHolds(t *testing.T) {
	var v verified
	now := time.Now()
	v.put(fakeToken("k", 1), Claims{}, now, now)
	if _, ok := v.get(fakeToken("k", 1), now, nil); ok {
		t.Error("a token at its expiry was remembered")
	}
	noKey := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256"}`)) + ".1.sig"
	v.put(noKey, Claims{}, now.Add(time.Hour), now)
	if _, ok := v.get(noKey, now, nil); ok {
		t.Error("a token whose header names no key was remembered")
	}
	v.put(fakeToken("k", 2), Claims{}, now.Add(100*24*time.Hour), now)
	if _, ok := v.get(fakeToken("k", 2), now.Add(maxRemembered-time.Second), nil); !ok {
		t.Error("a live token was forgotten before maxRemembered")
	}
	if _, ok := v.get(fakeToken("k", 2), now.Add(maxRemembered), nil); ok {
		t.Errorf("a token claiming 100 days was remembered past %s", maxRemembered)
	}
}

// remembered is how many tokens v holds.
func remembered(v *verified) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.tokens)
}
