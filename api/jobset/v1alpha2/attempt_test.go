package v1alpha2

import (
	"maps"
	"testing"
)

func TestJobAttemptMismatch(t *testing.T) {
	js := &JobSet{
		Spec: JobSetSpec{ReplicatedJobs: []ReplicatedJob{{Name: "w", Replicas: 2}}},
		Status: JobSetStatus{
			Restarts: 3, InPlaceRestarts: 1,
			ReplicatedJobsStatus: []ReplicatedJobStatus{{Name: "w", JobRestarts: []int32{0, 1}}},
		},
	}
	current := map[string]string{RestartsKey: "2", ReplicatedJobNameKey: "w", JobIndexKey: "1", JobRestartAttemptKey: "1"}
	// with is current with the keys given set, or removed for "".
	with := func(kv ...string) map[string]string {
		l := maps.Clone(current)
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(l, kv[i])
			} else {
				l[kv[i]] = kv[i+1]
			}
		}
		return l
	}
	cases := map[string]struct {
		labels  map[string]string
		wantKey string
	}{
		"of the current attempt":                      {current, ""},
		"of an earlier attempt":                       {with(RestartsKey, "1"), RestartsKey},
		"an attempt written otherwise":                {with(RestartsKey, "02"), RestartsKey},
		"of no replicated job":                        {with(ReplicatedJobNameKey, "x"), ReplicatedJobNameKey},
		"an index beyond replicas":                    {with(JobIndexKey, "2"), JobIndexKey},
		"no index":                                    {with(JobIndexKey, ""), JobIndexKey},
		"recreated alone since":                       {with(JobRestartAttemptKey, "0"), JobRestartAttemptKey},
		"no job-restart-attempt, never recreated":     {with(JobIndexKey, "0", JobRestartAttemptKey, ""), ""},
		"no job-restart-attempt where one was needed": {with(JobRestartAttemptKey, ""), JobRestartAttemptKey},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			key, why := JobAttemptMismatch(js, tc.labels)
			if key != tc.wantKey || (key == "") != (why == "") {
				t.Errorf("JobAttemptMismatch = %q, %q; want key %q", key, why, tc.wantKey)
			}
		})
	}
}
