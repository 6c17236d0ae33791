package coexist

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// defaultLeaseDuration is client-go's and upstream's lease duration, taken
// for a Lease that does not say its own.
const defaultLeaseDuration = 15 * time.Second

// Lease is what matters of one of upstream's Leases.
type Lease struct {
	Namespace, Name string
	// Holder is the holder's identity: with controller-runtime's leader
	// election, the Pod's name, "_", and a UUID.
	Holder string
	// Renewed is when the holder last renewed it; Expires, when the
	// Lease lapses unless renewed again.
	Renewed, Expires time.Time
	// Held: someone holds it and it has not lapsed at now. A controller
	// that stops without releasing its Lease (upstream's does not
	// release) holds it until it lapses.
	Held bool
}

// InspectLease reads a Lease at now. The Lease's times come from its
// holder's clock: a clock of ours behind the holder's keeps the Lease held
// that much longer; one ahead by more than the lease duration would take
// a renewed Lease for a lapsed one (nodes' clocks are kept in step far
// closer than 15 s).
func InspectLease(l *coordinationv1.Lease, now time.Time) Lease {
	out := Lease{Namespace: l.Namespace, Name: l.Name}
	if l.Spec.HolderIdentity != nil {
		out.Holder = *l.Spec.HolderIdentity
	}
	switch {
	case l.Spec.RenewTime != nil:
		out.Renewed = l.Spec.RenewTime.Time
	case l.Spec.AcquireTime != nil:
		out.Renewed = l.Spec.AcquireTime.Time
	default:
		return out
	}
	d := defaultLeaseDuration
	if l.Spec.LeaseDurationSeconds != nil && *l.Spec.LeaseDurationSeconds > 0 {
		d = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	out.Expires = out.Renewed.Add(d)
	out.Held = out.Holder != "" && now.Before(out.Expires)
	return out
}
