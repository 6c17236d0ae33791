package decide

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
)

// This file carries over what upstream JobSet's in-place restarts left in
// the status of a JobSet inplace takes over (docs/how-to/migrate-from-jobset.md):
// upstream's CRD has none of the epochs and the count of in-place restarts
// inplace keeps, and its agents report attempts, each one less than its
// epoch. Taken as inplace's own status, epochs 0, the Pods' attempts read
// as epochs beyond syncedEpoch + 1, which no agent reports (InvalidEpoch),
// and the group would never sync again; and the in-place restarts upstream
// made would not count towards maxRestarts.

// adoptUpstream returns js as Decide goes on from it: a copy whose epochs
// are those upstream's attempts stand for and, unless it has finished,
// whose restarts count the in-place restarts upstream made (as in-place
// restarts, all of them towards maxRestarts, as upstream counts them),
// with an Event that says so. It returns js itself, and no Event, for a
// JobSet whose status upstream did not write last (jobset.WrittenByUpstream)
// or that does not restart in place. The restart-attempt of the Jobs
// (jobset.RecreateAttempt) is unchanged: the Jobs are kept.
//
// The carried status is written with the rest of the plan's; from then on
// the epochs are inplace's, and the status is no longer upstream's.
func adoptUpstream(js *jobset.JobSet) (*jobset.JobSet, []Event) {
	if !jobset.InPlace(js) || !jobset.WrittenByUpstream(&js.Status) {
		return js, nil
	}
	out := js.DeepCopy()
	s := &out.Status
	s.DeprecatedEpoch, s.SyncedEpoch = jobset.UpstreamEpochs(&js.Status)
	if jobset.Finished(s) {
		return out, nil
	}
	n := jobset.UpstreamInPlaceRestarts(&js.Status)
	s.Restarts += n
	s.InPlaceRestarts += n
	s.RestartsCountTowardsMax += n
	msg := fmt.Sprintf("taken over from upstream JobSet at in-place restart attempt %s (syncedEpoch %d, deprecatedEpoch %d); counted the %d in-place restart(s) it made: restarts %d, %d of them in place, %d towards maxRestarts (%d)",
		attemptString(js.Status.CurrentInPlaceRestartAttempt), s.SyncedEpoch, s.DeprecatedEpoch, n, s.Restarts, s.InPlaceRestarts, countedRestarts(s), js.Spec.FailurePolicy.MaxRestarts)
	return out, []Event{{corev1.EventTypeNormal, ReasonUpstreamInPlaceAdopted, msg}}
}

func attemptString(a *int32) string {
	if a == nil {
		return "none"
	}
	return protocol.EpochOfAttempt(a).AttemptString()
}
