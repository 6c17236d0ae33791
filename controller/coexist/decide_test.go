package coexist

import (
	"strings"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ours := CRD{Installed: true, Ours: true, Served: true}
	upstream := CRD{Installed: true, Served: true, Pruned: []string{"status.inPlaceRestarts", "status.syncedEpoch"}}
	held := Lease{Namespace: UpstreamNamespace, Name: UpstreamLeaseNames[0], Holder: "jobset-controller-manager-7d9f-x2x4q_1b2c",
		Renewed: now.Add(-3 * time.Second), Expires: now.Add(12 * time.Second), Held: true}
	lapsed := held
	lapsed.Held = false

	for name, tc := range map[string]struct {
		crd     CRD
		leases  []Lease
		dropped []string
		// probeFailed and unserved: the dry run's failure, since when the
		// schema was seen not served.
		probeFailed string
		unserved    time.Time
		// want
		hold      bool
		reason    string
		upstream  bool
		transient bool
		// mentions are in the message: the cause and the fix.
		mentions []string
	}{
		"our CRD, no upstream Lease: run": {
			crd:      ours,
			mentions: []string{"not running"},
		},
		"our CRD, upstream's Lease lapsed: run": {
			crd:    ours,
			leases: []Lease{lapsed},
		},
		"upstream's controller runs: hold, whatever the CRD": {
			crd:      ours,
			leases:   []Lease{lapsed, held},
			hold:     true,
			reason:   ReasonUpstreamRunning,
			upstream: true,
			mentions: []string{"jobset-system/6d4f6a47.jobset.x-k8s.io", "renewed 3s ago", "Pod jobset-controller-manager-7d9f-x2x4q", "--replicas=0", "docs/how-to/migrate-from-jobset.md"},
		},
		"upstream's controller runs on upstream's CRD: its running is said first": {
			crd:      upstream,
			leases:   []Lease{held},
			hold:     true,
			reason:   ReasonUpstreamRunning,
			upstream: true,
		},
		"upstream's CRD, its controller stopped: hold, naming the pruned fields and the fix": {
			crd:      upstream,
			leases:   []Lease{lapsed},
			hold:     true,
			reason:   ReasonForeignCRD,
			mentions: []string{"status.inPlaceRestarts, status.syncedEpoch", "inplace.dev/crd-owner=inplace", "--force-conflicts -f jobset-crd.yaml"},
		},
		"ours before the label, every field kept: run, saying the CRD is old": {
			crd:      CRD{Installed: true, Served: true},
			mentions: []string{"lacks the label inplace.dev/crd-owner=inplace", "docs/how-to/upgrade.md"},
		},
		"ours, older: hold until upgraded": {
			crd:      CRD{Installed: true, Ours: true, Served: true, Pruned: []string{"status.syncedPods"}},
			hold:     true,
			reason:   ReasonOutdatedCRD,
			mentions: []string{"status.syncedPods", "--force-conflicts -f jobset-crd.yaml", "docs/how-to/upgrade.md"},
		},
		"our CRD, not yet served: hold, naming what the API server drops": {
			crd:       ours,
			dropped:   []string{"status.syncedEpoch", "status.inPlaceRestarts"},
			unserved:  now.Add(-time.Second),
			hold:      true,
			reason:    ReasonSchemaNotServed,
			transient: true,
			mentions:  []string{"still drops status.syncedEpoch, status.inPlaceRestarts", "resumes once the API server serves"},
		},
		"our CRD, not served for the grace: no longer transient, saying for how long": {
			crd:      ours,
			dropped:  []string{"status.syncedEpoch"},
			unserved: now.Add(-SchemaGrace),
			hold:     true,
			reason:   ReasonSchemaNotServed,
			mentions: []string{"It has not for 10s", "/readyz?verbose"},
		},
		"our CRD, the dry run failed: hold, saying why": {
			crd:         ours,
			probeFailed: "etcd unavailable",
			unserved:    now,
			hold:        true,
			reason:      ReasonSchemaNotServed,
			transient:   true,
			mentions:    []string{"did not answer the dry-run status write", "etcd unavailable"},
		},
		"upstream's CRD, whatever the API server drops: the CRD is said first": {
			crd:     upstream,
			dropped: []string{"status.syncedEpoch"},
			hold:    true,
			reason:  ReasonForeignCRD,
		},
		"no CRD": {
			hold:     true,
			reason:   ReasonCRDMissing,
			mentions: []string{"is not installed", "jobset-crd.yaml"},
		},
		"a CRD that does not serve v1alpha2": {
			crd:      CRD{Installed: true, Ours: true},
			hold:     true,
			reason:   ReasonCRDMissing,
			mentions: []string{"does not serve jobset.x-k8s.io/v1alpha2"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			v := Decide(Input{CRD: tc.crd, Leases: tc.leases, Namespace: UpstreamNamespace, Now: now, Dropped: tc.dropped, ProbeFailed: tc.probeFailed, UnservedSince: tc.unserved})
			if v.Hold != tc.hold || v.Reason != tc.reason || (v.Upstream != nil) != tc.upstream || v.Transient != tc.transient {
				t.Errorf("Decide = hold %v, reason %q, upstream %v, transient %v; want %v, %q, %v, %v",
					v.Hold, v.Reason, v.Upstream != nil, v.Transient, tc.hold, tc.reason, tc.upstream, tc.transient)
			}
			for _, m := range tc.mentions {
				if !strings.Contains(v.Message, m) {
					t.Errorf("message %q does not mention %q", v.Message, m)
				}
			}
		})
	}
}
