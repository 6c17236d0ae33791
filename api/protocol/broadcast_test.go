package protocol

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRoundTrip(t *testing.T) {
	for _, b := range []Broadcast{
		{},
		{DeprecatedEpoch: 3, SyncedEpoch: 4},
		{SyncedEpoch: 1, OpenReplicatedJobs: []string{}},
		{SyncedEpoch: 1, OpenReplicatedJobs: []string{"driver", "workers"}},
	} {
		got, err := DecodeBroadcast(EncodeBroadcast(b))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(b, got); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
	if (Broadcast{}).Equal(Broadcast{OpenReplicatedJobs: []string{}}) {
		t.Error("all open and none open compare equal")
	}
	if b, _ := DecodeBroadcast(EncodeBroadcast(Broadcast{OpenReplicatedJobs: []string{}})); b.Open("x") {
		t.Error("an empty list opens a barrier")
	}
	if _, err := DecodeBroadcast(map[string]string{KeyDeprecatedEpoch: "-1", KeySyncedEpoch: "0"}); err == nil {
		t.Error("a negative epoch decoded")
	}
}
