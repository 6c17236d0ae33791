package decide

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// ttlDecision says whether a finished JobSet is due for deletion, and if not
// yet, after how long to look again.
func ttlDecision(js *jobset.JobSet, now time.Time) (expired bool, requeueAfter time.Duration) {
	if js.Spec.TTLSecondsAfterFinished == nil {
		return false, 0
	}
	var finishedAt time.Time
	for _, t := range []jobset.JobSetConditionType{jobset.JobSetCompleted, jobset.JobSetFailed} {
		if c := meta.FindStatusCondition(js.Status.Conditions, string(t)); c != nil && c.Status == "True" {
			finishedAt = c.LastTransitionTime.Time
		}
	}
	if finishedAt.IsZero() {
		return false, 0
	}
	expiry := finishedAt.Add(time.Duration(*js.Spec.TTLSecondsAfterFinished) * time.Second)
	if !now.Before(expiry) {
		return true, 0
	}
	return false, expiry.Sub(now)
}
