package coexist

import (
	"fmt"
	"strings"
	"time"
)

// ReadGrace is how long the last verdict stands while the reads that would
// renew it fail, so that an API server that errs for a moment neither
// stops the controller (in-place restarts included) nor flaps its
// readiness. It is shorter than upstream's Lease duration (15 s), the
// staleness upstream's own leader election accepts.
const ReadGrace = 10 * time.Second

// Unread is the verdict while the reads fail, since the first failure
// (since) and err the last: the last verdict taken on reads (last), if
// any succeeded (known), until ReadGrace has passed; then the controller
// is held for ReasonCheckFailing. Before any read succeeded it is held
// too, but without a reason until ReadGrace has passed: nothing is known
// to warn JobSets of, and a first read that fails may be the only one.
func Unread(last Verdict, known bool, since, now time.Time, err error, namespace string) Verdict {
	past := now.Sub(since) >= ReadGrace
	if known && !past {
		return last
	}
	v := Verdict{Hold: true, Upstream: last.Upstream, CRD: last.CRD, Message: UnreadMessage(since, now, err, namespace)}
	if past {
		v.Reason = ReasonCheckFailing
	}
	return v
}

// UnreadMessage says that the reads have failed since since (now: once),
// the last with err, and what the manager needs.
func UnreadMessage(since, now time.Time, err error, namespace string) string {
	what := "failed"
	if d := now.Sub(since).Round(time.Second); d > 0 {
		what = "has failed for " + d.String()
	}
	return fmt.Sprintf("reading the JobSet CRD or upstream JobSet's Leases %s: %v "+
		"(the manager needs get, list and watch on customresourcedefinitions/%s and on leases %s in namespace %s)",
		what, err, CRDName, strings.Join(UpstreamLeaseNames, " and "), namespace)
}
