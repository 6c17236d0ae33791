package v1alpha2

import "github.com/inplace-dev/inplace/api/protocol"

// This file reads what upstream JobSet's in-place restarts left in a
// JobSet's status, for a JobSet inplace takes over: the controller carries
// it into its own fields, and inplacectl migrate says beforehand what it
// will carry (docs/how-to/migrate-from-jobset.md).

// WrittenByUpstream reports whether upstream JobSet wrote the status last:
// its in-place restart attempts are set while inplace's epochs are not.
// inplace writes the attempts in step with its epochs, and so never
// leaves one set with both epochs 0; upstream's CRD prunes the epochs.
func WrittenByUpstream(s *JobSetStatus) bool {
	return (s.CurrentInPlaceRestartAttempt != nil || s.PreviousInPlaceRestartAttempt != nil) &&
		s.SyncedEpoch == 0 && s.DeprecatedEpoch == 0
}

// UpstreamEpochs are the epochs upstream's attempts stand for
// (protocol.EpochOfAttempt; 0 where the attempt is unset): the epochs
// inplace goes on from, with the Pods' in-place-restart-attempt
// annotations, written by upstream's agents, read as the same epochs.
func UpstreamEpochs(s *JobSetStatus) (deprecated, synced int32) {
	return int32(protocol.EpochOfAttempt(s.PreviousInPlaceRestartAttempt)), int32(protocol.EpochOfAttempt(s.CurrentInPlaceRestartAttempt))
}

// UpstreamInPlaceRestarts is how many times upstream JobSet restarted the
// JobSet in place, read from a status it wrote last (WrittenByUpstream;
// 0 for any other). Upstream counts its in-place restarts nowhere but in
// the attempt its Pods reached: currentInPlaceRestartAttempt, or
// previousInPlaceRestartAttempt + 1 while a restart is under way. Once the
// group first synced, at attempt 0, every restart moved the attempt on by
// one: in place, or by recreating every Job (status.restarts) or one
// (status.replicatedJobsStatus[].jobRestarts), whose new Pods start at the
// next attempt. The in-place restarts are the attempt less the others. A
// recreation before the first sync moved no attempt, so the count may
// fall short of upstream's, never beyond it.
func UpstreamInPlaceRestarts(s *JobSetStatus) int32 {
	if !WrittenByUpstream(s) {
		return 0
	}
	var attempt int32
	if c := s.CurrentInPlaceRestartAttempt; c != nil {
		attempt = *c
	}
	if p := s.PreviousInPlaceRestartAttempt; p != nil {
		attempt = max(attempt, *p+1)
	}
	return max(attempt-Recreations(s), 0)
}
