package migration

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
)

// jobSetNotes says what changes for one JobSet when inplace takes it
// over; none of it blocks the migration. A JobSet another controller
// manages (spec.managedBy) is left alone by both, and a finished one
// creates no Job again: of those, only the fields the CRD drops matter.
func jobSetNotes(j JobSet) []string {
	js := j.JobSet
	var notes []string
	if len(j.Undeclared) > 0 {
		notes = append(notes, fmt.Sprintf("stored fields inplace's CRD does not have, which the API server drops once the CRD is replaced: %s", strings.Join(j.Undeclared, ", ")))
	}
	if m := ptr.Deref(js.Spec.ManagedBy, jobset.JobSetControllerName); m != jobset.JobSetControllerName || jobset.Finished(&js.Status) {
		return notes
	}
	if why := restartUnderWay(j); why != "" {
		notes = append(notes, "a restart is under way ("+why+"): inplace carries it on, deleting the Jobs of the earlier attempt and creating those of the new one")
	}
	if note := upstreamInPlace(js); note != "" {
		notes = append(notes, note)
	}
	var recreated []string
	for i := range j.Jobs {
		if why := notAdopted(js, &j.Jobs[i]); why != "" {
			recreated = append(recreated, j.Jobs[i].Name+" ("+why+")")
		}
	}
	if len(recreated) > 0 {
		sort.Strings(recreated)
		notes = append(notes, fmt.Sprintf("inplace would delete and recreate these Jobs of the current attempt, restarting their Pods: %s", strings.Join(recreated, ", ")))
	}
	return notes
}

// upstreamInPlace says what inplace carries over of upstream's in-place
// restarts of an InPlaceRestart JobSet (controller/decide's
// adoptUpstream), or "" when upstream restarted it in place never or
// inplace wrote its status: they count, once, as in-place restarts
// towards maxRestarts, as upstream counted them, and the epochs go on from
// upstream's attempts.
func upstreamInPlace(js *jobset.JobSet) string {
	s := &js.Status
	n := jobset.UpstreamInPlaceRestarts(s)
	if js.Spec.FailurePolicy == nil || js.Spec.FailurePolicy.RestartStrategy != jobset.InPlaceRestart || n == 0 {
		return ""
	}
	deprecated, synced := jobset.UpstreamEpochs(s)
	return fmt.Sprintf("upstream restarted it in place %d time(s) (currentInPlaceRestartAttempt %s, less %d recreation(s)): inplace counts them once it takes the JobSet over, "+
		"as in-place restarts towards maxRestarts (%d), as upstream did: status.restarts %d -> %d, inPlaceRestarts %d, restartsCountTowardsMax %d -> %d; "+
		"its epochs go on from upstream's attempts (syncedEpoch %d, deprecatedEpoch %d)",
		n, attempt(s.CurrentInPlaceRestartAttempt), jobset.Recreations(s), js.Spec.FailurePolicy.MaxRestarts,
		s.Restarts, s.Restarts+n, n, s.RestartsCountTowardsMax, s.RestartsCountTowardsMax+n, synced, deprecated)
}

func attempt(a *int32) string {
	if a == nil {
		return "unset"
	}
	return protocol.EpochOfAttempt(a).AttemptString()
}

// restartUnderWay says why a restart of the JobSet is under way, or "".
// The status says it as inplace will read it once it takes the JobSet
// over (jobset.RestartStateOf): Restarting or Recreating. A suspended
// JobSet is not restarting, whatever its epochs: its Pods are gone, and
// it resumes under inplace as a first start. One fact the state leaves to
// the epochs: upstream's in-place restarts set no condition inplace
// reads, so a status upstream wrote during one reads Starting (its
// attempt deprecated, none synced after it), and inplace carries the
// restart on as such a start. Jobs of an earlier attempt left say it
// too.
func restartUnderWay(j JobSet) string {
	js := j.JobSet
	s := &js.Status
	switch state := jobset.RestartStateOf(js, s); {
	case state.RestartUnderWay():
		return fmt.Sprintf("%s: condition %s", state, jobset.JobSetRestarting)
	case state == jobset.StateStarting && jobset.WrittenByUpstream(s) && s.CurrentInPlaceRestartAttempt != nil:
		return fmt.Sprintf("in-place restart attempt %d deprecated, none synced after it", *s.PreviousInPlaceRestartAttempt)
	}
	var old []string
	for _, job := range j.Jobs {
		if a, err := strconv.Atoi(job.Labels[jobset.RestartsKey]); err == nil && int32(a) < jobset.RecreateAttempt(&js.Status) {
			old = append(old, job.Name)
		}
	}
	if len(old) > 0 {
		slices.Sort(old)
		return fmt.Sprintf("Jobs of an earlier attempt remain: %s", strings.Join(old, ", "))
	}
	return ""
}

// notAdopted says why inplace would not take a Job of the JobSet's
// current attempt as its own, or "": the controller's rules
// (jobset.JobAttemptMismatch). A Job of another attempt, or one being
// deleted, is deleted by either controller: no note.
func notAdopted(js *jobset.JobSet, job *batchv1.Job) string {
	if job.DeletionTimestamp != nil {
		return ""
	}
	if key, why := jobset.JobAttemptMismatch(js, job.Labels); key != jobset.RestartsKey {
		return why
	}
	return ""
}

// undeclared lists the fields of a stored object that schema does not
// declare, as dotted paths ("[]" for the items of a list).
func undeclared(obj map[string]any, schema *apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	var walk func(path string, v any, s *apiextensionsv1.JSONSchemaProps)
	walk = func(path string, v any, s *apiextensionsv1.JSONSchemaProps) {
		if s == nil || ptr.Deref(s.XPreserveUnknownFields, false) {
			return
		}
		switch v := v.(type) {
		case map[string]any:
			for k, child := range v {
				p := k
				if path != "" {
					p = path + "." + k
				}
				// The object's metadata, and an embedded object's (a Job
				// template's), are the API server's to keep or drop,
				// under either CRD alike.
				if k == "metadata" && (path == "" || s.XEmbeddedResource) || path == "" && (k == "apiVersion" || k == "kind") {
					continue
				}
				if ps, ok := s.Properties[k]; ok {
					walk(p, child, &ps)
					continue
				}
				if ap := s.AdditionalProperties; ap != nil && (ap.Allows || ap.Schema != nil) {
					walk(p, child, ap.Schema)
					continue
				}
				out = append(out, p)
			}
		case []any:
			if s.Items != nil && s.Items.Schema != nil {
				for _, item := range v {
					walk(path+"[]", item, s.Items.Schema)
				}
			}
		}
	}
	walk("", obj, schema)
	slices.Sort(out)
	return slices.Compact(out)
}
