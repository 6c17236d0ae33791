package token

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"
	"time"
)

// maxVerified bounds the tokens remembered as verified: above the agents
// of the largest cluster (one token each, two while the kubelet rotates
// it).
const maxVerified = 1 << 16

// maxRemembered bounds how long a token is remembered, whatever expiry
// it claims: the kubelet's projected tokens live an hour by default.
const maxRemembered = time.Hour

// sweepEvery is the least time between two sweeps of a full set.
const sweepEvery = 10 * time.Second

// verified remembers the tokens that passed Verify, so that an agent's
// next report costs a map lookup instead of a signature check: at 10,000
// agents reporting within a second, RSA verification was a tenth of the
// leader's CPU in the restart.
//
// A remembered token holds only as long as a fresh check would pass: an
// entry is kept until the token's expiry (at most maxRemembered), and is
// used only while the issuer still publishes the key that signed it
// (keyKnown, from the last key set read), so a key retired from the set
// retires the tokens it verified, however they were remembered. Tokens
// whose header names no key are not remembered. Whether the bound Pod
// still exists is the caller's check, per request. Only successes are
// remembered, by the token's SHA-256; a full set takes no more until
// entries expire, so whoever mints tokens cannot push the agents' out.
type verified struct {
	mu        sync.Mutex
	tokens    map[[sha256.Size]byte]verifiedToken
	lastSweep time.Time
}

type verifiedToken struct {
	claims Claims
	keyID  string
	expiry time.Time
}

// get returns the claims of a token remembered, unexpired, whose key is
// still known.
func (v *verified) get(raw string, now time.Time, keyKnown func(string) bool) (Claims, bool) {
	key := sha256.Sum256([]byte(raw))
	v.mu.Lock()
	t, ok := v.tokens[key]
	if ok && !now.Before(t.expiry) {
		delete(v.tokens, key)
		ok = false
	}
	v.mu.Unlock()
	if !ok || (keyKnown != nil && !keyKnown(t.keyID)) {
		return Claims{}, false
	}
	return t.claims, true
}

// put remembers a verified token until expiry (at most maxRemembered).
func (v *verified) put(raw string, c Claims, expiry, now time.Time) {
	keyID := headerKeyID(raw)
	expiry = minTime(expiry, now.Add(maxRemembered))
	if keyID == "" || !now.Before(expiry) {
		return
	}
	key := sha256.Sum256([]byte(raw))
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.tokens == nil {
		v.tokens = map[[sha256.Size]byte]verifiedToken{}
	}
	if len(v.tokens) >= maxVerified {
		if now.Sub(v.lastSweep) < sweepEvery {
			return
		}
		v.lastSweep = now
		for k, t := range v.tokens {
			if !now.Before(t.expiry) {
				delete(v.tokens, k)
			}
		}
		if len(v.tokens) >= maxVerified {
			return
		}
	}
	v.tokens[key] = verifiedToken{claims: c, keyID: keyID, expiry: expiry}
}

// headerKeyID is the key id of a compact JWS's protected header; "" if
// it has none or cannot be read (the token then verified by other means,
// or not at all: it is not remembered).
func headerKeyID(raw string) string {
	header, _, ok := strings.Cut(raw, ".")
	if !ok {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil {
		return ""
	}
	var h struct {
		KeyID string `json:"kid"`
	}
	if json.Unmarshal(b, &h) != nil {
		return ""
	}
	return h.KeyID
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
