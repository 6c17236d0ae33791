package protocol

import (
	"fmt"
	"slices"
	"strings"
)

// Keys of the ConfigMap's data.
const (
	KeyDeprecatedEpoch = "deprecatedEpoch"
	KeySyncedEpoch     = "syncedEpoch"
	// KeyOpenReplicatedJobs is a comma-separated list of the replicated jobs
	// whose barrier may lift; absent means every one, empty means none.
	KeyOpenReplicatedJobs = "openReplicatedJobs"
	// KeyDisabled, "true", turns the agents off: they lift their barrier
	// at once and never report an epoch (the JobSet carries upstream
	// JobSet's disable-in-place-restart annotation).
	KeyDisabled = "disabled"
)

// Broadcast is what the controller publishes about a JobSet for its agents.
type Broadcast struct {
	// DeprecatedEpoch: agents at or below it restart their Pod in place.
	DeprecatedEpoch int32
	// SyncedEpoch: agents at it lift their barrier.
	SyncedEpoch int32
	// OpenReplicatedJobs lists the replicated jobs whose barriers may lift
	// (startup order); nil means every one.
	OpenReplicatedJobs []string
	// Disabled turns the agents off: they lift their barrier at once and
	// never report an epoch or restart their Pod.
	Disabled bool
	// Reports is where the agents report directly (report.go); zero: on
	// their Pods.
	Reports ReportEndpoint
}

// Open reports whether the barrier of a replicated job may lift.
func (b Broadcast) Open(replicatedJob string) bool {
	return b.OpenReplicatedJobs == nil || slices.Contains(b.OpenReplicatedJobs, replicatedJob)
}

// Equal reports whether two broadcasts say the same; a nil and an empty
// list of open replicated jobs differ (every one open vs none).
func (b Broadcast) Equal(o Broadcast) bool {
	return b.DeprecatedEpoch == o.DeprecatedEpoch && b.SyncedEpoch == o.SyncedEpoch && b.Disabled == o.Disabled && b.Reports == o.Reports &&
		(b.OpenReplicatedJobs == nil) == (o.OpenReplicatedJobs == nil) &&
		slices.Equal(b.OpenReplicatedJobs, o.OpenReplicatedJobs)
}

// BroadcastName is the name of the broadcast ConfigMap of a JobSet.
func BroadcastName(jobSet string) string { return jobSet + "-epochs" }

// EncodeBroadcast returns the ConfigMap data of b.
func EncodeBroadcast(b Broadcast) map[string]string {
	data := map[string]string{
		KeyDeprecatedEpoch: Epoch(b.DeprecatedEpoch).String(),
		KeySyncedEpoch:     Epoch(b.SyncedEpoch).String(),
	}
	if b.OpenReplicatedJobs != nil {
		data[KeyOpenReplicatedJobs] = strings.Join(b.OpenReplicatedJobs, ",")
	}
	if b.Disabled {
		data[KeyDisabled] = "true"
	}
	b.Reports.set(data)
	return data
}

// DecodeBroadcast reads the data of a broadcast ConfigMap.
func DecodeBroadcast(data map[string]string) (Broadcast, error) {
	var b Broadcast
	for key, dst := range map[string]*int32{KeyDeprecatedEpoch: &b.DeprecatedEpoch, KeySyncedEpoch: &b.SyncedEpoch} {
		n, err := ParseEpoch(data[key])
		if err != nil {
			return Broadcast{}, fmt.Errorf("broadcast %s is %q: want a non-negative int32", key, data[key])
		}
		*dst = int32(n)
	}
	b.Disabled = data[KeyDisabled] == "true"
	b.Reports = reportEndpointOf(data)
	if open, ok := data[KeyOpenReplicatedJobs]; ok {
		b.OpenReplicatedJobs = []string{}
		if open != "" {
			b.OpenReplicatedJobs = strings.Split(open, ",")
		}
	}
	return b, nil
}
