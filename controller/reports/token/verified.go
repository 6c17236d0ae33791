package token

import (
	"crypto/sha256"
	"sync"
	"time"
)

// maxVerified bounds the tokens remembered as verified: above the agents
// of the largest cluster (one token each, two while the kubelet rotates
// it).
const maxVerified = 1 << 16

// verified remembers the tokens that passed Verify until they expire, so
// that an agent's next report costs a map lookup instead of a signature
// check: at 10,000 agents reporting within a second, RSA verification
// was a tenth of the leader's CPU in the restart.
//
// What it remembers holds as long as a fresh check would pass: the claims
// are the token's own, signed; an entry is dropped at the token's expiry,
// and every entry when the issuer's key set changes (a key retired
// retires the tokens it verified). Whether the bound Pod still exists is the caller's
// check, per request, as before. Only successes are remembered, keyed by
// the token's SHA-256, so a caller's made-up tokens take no room.
type verified struct {
	mu     sync.Mutex
	tokens map[[sha256.Size]byte]verifiedToken
}

type verifiedToken struct {
	claims Claims
	expiry time.Time
}

func (v *verified) get(raw string, now time.Time) (Claims, bool) {
	key := sha256.Sum256([]byte(raw))
	v.mu.Lock()
	defer v.mu.Unlock()
	t, ok := v.tokens[key]
	if !ok {
		return Claims{}, false
	}
	if !now.Before(t.expiry) {
		delete(v.tokens, key)
		return Claims{}, false
	}
	return t.claims, true
}

func (v *verified) put(raw string, c Claims, expiry, now time.Time) {
	if !now.Before(expiry) {
		return
	}
	key := sha256.Sum256([]byte(raw))
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.tokens == nil {
		v.tokens = map[[sha256.Size]byte]verifiedToken{}
	}
	if len(v.tokens) >= maxVerified {
		for k, t := range v.tokens {
			if !now.Before(t.expiry) {
				delete(v.tokens, k)
			}
		}
		if len(v.tokens) >= maxVerified {
			// Full of live tokens: more than any cluster's agents hold,
			// so someone is minting them. Start over rather than grow.
			clear(v.tokens)
		}
	}
	v.tokens[key] = verifiedToken{claims: c, expiry: expiry}
}

func (v *verified) clear() {
	v.mu.Lock()
	defer v.mu.Unlock()
	clear(v.tokens)
}

func (v *verified) len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.tokens)
}
