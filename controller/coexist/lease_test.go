package coexist

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestInspectLease(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.MicroTime { return ptr.To(metav1.NewMicroTime(now.Add(d))) }
	lease := func(holder string, renewed *metav1.MicroTime, seconds int32) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: UpstreamNamespace, Name: UpstreamLeaseNames[0]}}
		if holder != "" {
			l.Spec.HolderIdentity = ptr.To(holder)
		}
		l.Spec.RenewTime = renewed
		if seconds > 0 {
			l.Spec.LeaseDurationSeconds = ptr.To(seconds)
		}
		return l
	}
	const holder = "jobset-controller-manager-7d9f-x2x4q_1b2c"
	for name, tc := range map[string]struct {
		lease *coordinationv1.Lease
		want  Lease
	}{
		"renewed 5s ago, 15s lease: held": {
			lease: lease(holder, at(-5*time.Second), 15),
			want:  Lease{Holder: holder, Renewed: now.Add(-5 * time.Second), Expires: now.Add(10 * time.Second), Held: true},
		},
		"renewed 16s ago, 15s lease: lapsed": {
			lease: lease(holder, at(-16*time.Second), 15),
			want:  Lease{Holder: holder, Renewed: now.Add(-16 * time.Second), Expires: now.Add(-time.Second)},
		},
		"lapses exactly now: not held": {
			lease: lease(holder, at(-15*time.Second), 15),
			want:  Lease{Holder: holder, Renewed: now.Add(-15 * time.Second), Expires: now},
		},
		"no duration: client-go's 15s": {
			lease: lease(holder, at(-14*time.Second), 0),
			want:  Lease{Holder: holder, Renewed: now.Add(-14 * time.Second), Expires: now.Add(time.Second), Held: true},
		},
		"released (no holder): not held": {
			lease: lease("", at(-time.Second), 15),
			want:  Lease{Renewed: now.Add(-time.Second), Expires: now.Add(14 * time.Second)},
		},
		"never renewed: not held": {
			lease: lease(holder, nil, 15),
			want:  Lease{Holder: holder},
		},
	} {
		t.Run(name, func(t *testing.T) {
			tc.want.Namespace, tc.want.Name = UpstreamNamespace, UpstreamLeaseNames[0]
			if diff := cmp.Diff(tc.want, InspectLease(tc.lease, now)); diff != "" {
				t.Errorf("InspectLease (-want +got):\n%s", diff)
			}
		})
	}
}
