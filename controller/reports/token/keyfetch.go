package token

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

const (
	// keyRefetchInterval is the least time between two reads of the key
	// set. A key the API server starts signing with is learned at most
	// this late; tokens signed with it are refused until then, and the
	// agents retry their reports.
	keyRefetchInterval = 10 * time.Second
	// maxKeySetBytes bounds what is read of a key-set response; the API
	// server's holds a few public keys.
	maxKeySetBytes = 1 << 20
)

// keyFetches is the transport of the key set: it lets one request through
// to the API server per interval and answers the others, until the
// interval has passed, with the outcome of the last one.
//
// go-oidc refetches the key set whenever a token names a key id it has not
// cached, and merges only fetches that run at the same time. The key id is
// the token's, so the caller's to choose: without this bound, every report
// with a made-up key id would cost the API server a request.
//
// It serves one URL (the key set's), so it keeps one answer. It holds its
// lock across the request: go-oidc runs one fetch at a time anyway, and a
// second caller is better made to wait for the answer than sent to ask
// again.
type keyFetches struct {
	next     http.RoundTripper
	interval time.Duration
	clock    clock.PassiveClock

	mu sync.Mutex
	// at is when the last request was sent; zero before the first.
	at time.Time
	// The last answer: a response (status, header, body), or err.
	status int
	header http.Header
	body   []byte
	err    error
	// keyIDs are the key ids of the last key set read.
	keyIDs atomic.Pointer[map[string]bool]
}

func newKeyFetches(next http.RoundTripper, interval time.Duration, clk clock.PassiveClock) *keyFetches {
	return &keyFetches{next: next, interval: interval, clock: clk}
}

func (k *keyFetches) RoundTrip(req *http.Request) (*http.Response, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.at.IsZero() || k.clock.Since(k.at) >= k.interval {
		k.at = k.clock.Now()
		k.fetch(req)
	}
	if k.err != nil {
		return nil, k.err
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", k.status, http.StatusText(k.status)),
		StatusCode:    k.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        k.header.Clone(),
		Body:          io.NopCloser(bytes.NewReader(k.body)),
		ContentLength: int64(len(k.body)),
		Request:       req,
	}, nil
}

// fetch sends req and records the answer.
func (k *keyFetches) fetch(req *http.Request) {
	k.status, k.header, k.body = 0, nil, nil
	resp, err := k.next.RoundTrip(req)
	if err != nil {
		k.err = err
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKeySetBytes))
	if err != nil {
		k.err = fmt.Errorf("reading the key set: %w", err)
		return
	}
	if resp.StatusCode == http.StatusOK {
		k.noteKeyIDs(body)
	}
	k.status, k.header, k.body, k.err = resp.StatusCode, resp.Header.Clone(), body, nil
}

// noteKeyIDs keeps the key ids of a key set read, for keyKnown; a body
// that is not a key set leaves the last ones.
func (k *keyFetches) noteKeyIDs(body []byte) {
	var set struct {
		Keys []struct {
			KeyID string `json:"kid"`
		} `json:"keys"`
	}
	if json.Unmarshal(body, &set) != nil {
		return
	}
	ids := make(map[string]bool, len(set.Keys))
	for _, key := range set.Keys {
		ids[key.KeyID] = true
	}
	k.keyIDs.Store(&ids)
}

// keyKnown reports whether the last key set read lists keyID: tokens
// remembered as verified hold only while their key is published.
func (k *keyFetches) keyKnown(keyID string) bool {
	ids := k.keyIDs.Load()
	return ids != nil && (*ids)[keyID]
}
