package coexist

import (
	"fmt"
	"strings"
	"time"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// Reasons of the verdicts, for the Events on the CRD and on JobSets, the
// logs and the readiness check.
const (
	// ReasonUpstreamRunning: upstream's controller holds its Lease.
	ReasonUpstreamRunning = "UpstreamJobSetControllerRunning"
	// ReasonForeignCRD: the JobSet CRD is not ours (upstream's, say).
	ReasonForeignCRD = "ForeignJobSetCRD"
	// ReasonOutdatedCRD: the CRD is ours but from an older release,
	// without status fields this controller writes.
	ReasonOutdatedCRD = "OutdatedJobSetCRD"
	// ReasonCRDMissing: no JobSet CRD, or none serving v1alpha2.
	ReasonCRDMissing = "JobSetCRDMissing"
	// ReasonSchemaNotServed: the CRD keeps every status field, but the API
	// server still drops some status counters from a status write (or the
	// write that would tell failed): it has not yet taken up the schema of
	// a CRD just replaced.
	ReasonSchemaNotServed = "JobSetCRDSchemaNotServed"
	// ReasonSchemaUnchecked: the API server refused the dry-run status
	// write that tells whether it serves the CRD's schema; the controller
	// goes on the CRD's word.
	ReasonSchemaUnchecked = "JobSetCRDSchemaUnchecked"
	// ReasonResumed: what held the controller back is gone.
	ReasonResumed = "JobSetReconcileResumed"
	// ReasonCheckFailing: the CRD or the Leases cannot be read; past
	// ReadGrace, the reason the controller is held.
	ReasonCheckFailing = "UpstreamJobSetCheckFailing"
	// ReasonCheckRecovered: they can be read again.
	ReasonCheckRecovered = "UpstreamJobSetCheckRecovered"
)

// Input is what the verdict is taken on.
type Input struct {
	CRD CRD
	// Leases are upstream's Leases that exist.
	Leases []Lease
	// Namespace is where upstream's controller was looked for.
	Namespace string
	Now       time.Time
	// Dropped are the status fields the API server dropped from a dry-run
	// status write (ServedProbe), while the CRD's schema keeps them all;
	// ProbeFailed, why that write failed, when it failed for a reason that
	// may pass. UnservedSince is when the first of them was seen for the
	// CRD as it is.
	Dropped       []string
	ProbeFailed   string
	UnservedSince time.Time
}

// SchemaGrace is how long the API server may take to serve a changed
// CRD's schema before the hold that waits for it is said on every JobSet.
const SchemaGrace = ReadGrace

// Verdict says whether the JobSet controller may write JobSets and their
// children.
type Verdict struct {
	// Hold: it may not; Reason and Message say why and what to do.
	Hold            bool
	Reason, Message string
	// Upstream is the Lease upstream's controller holds, when it runs.
	Upstream *Lease
	// CRD as inspected.
	CRD CRD
	// Transient: the hold is expected to end within moments, by itself;
	// it is said on the CRD and in the log, not on each JobSet, and checked
	// again sooner.
	Transient bool
}

// Decide takes the verdict. Upstream's controller running comes first:
// two controllers writing the same JobSets and Jobs is the harm that is
// happening now, whatever the CRD. A CRD that would prune the status
// fields the controller writes (Pruned) holds it back as well, with or
// without upstream's controller: without status.inPlaceRestarts a JobSet
// restarted in place once reads as being on a later attempt than its
// Jobs, which would all be recreated, and without the epochs no barrier
// would lift. A CRD that keeps them all but lacks our label (ours from a
// release before the label) is safe to write through: said, not held.
// Once the CRD keeps them, the API server must serve it so: it takes up a
// replaced CRD's schema a moment after the write, and a status written in
// between loses the fields (Dropped) as surely as under the old CRD. That
// hold is transient for SchemaGrace; past it, it is said on the JobSets too.
func Decide(in Input) Verdict {
	v := Verdict{CRD: in.CRD}
	for i := range in.Leases {
		if l := in.Leases[i]; l.Held {
			v.Hold, v.Reason, v.Upstream = true, ReasonUpstreamRunning, &l
			v.Message = fmt.Sprintf("upstream JobSet's controller is running: Lease %s/%s is held by %s, renewed %s ago, until %s: "+
				"inplace reconciles no JobSet while it runs, as both would write the same JobSets and Jobs. "+
				"Stop it (kubectl -n %s scale deployment %s --replicas=0, the Deployment of Pod %s) and follow docs/how-to/migrate-from-jobset.md; "+
				"inplace resumes once the Lease lapses",
				l.Namespace, l.Name, l.Holder, in.Now.Sub(l.Renewed).Round(time.Second), l.Expires.UTC().Format(time.RFC3339),
				l.Namespace, strings.Join(UpstreamDeployments, " or "), podOf(l.Holder))
			return v
		}
	}
	c := in.CRD
	switch {
	case !c.Installed || !c.Served:
		v.Hold, v.Reason = true, ReasonCRDMissing
		what := "is not installed"
		if c.Installed {
			what = "does not serve " + jobset.GroupVersion.String()
		}
		v.Message = fmt.Sprintf("the JobSet CRD %s %s: apply inplace's (%s)", CRDName, what, ApplyCRD)
	case !c.Ours && len(c.Pruned) > 0:
		v.Hold, v.Reason = true, ReasonForeignCRD
		v.Message = fmt.Sprintf("the JobSet CRD %s is not inplace's (no label %s=%s; upstream JobSet's, say)%s: "+
			"inplace reconciles no JobSet until it is replaced with inplace's: %s; the JobSets stay (see docs/how-to/migrate-from-jobset.md)",
			CRDName, jobset.CRDOwnerLabel, jobset.CRDOwner, prunedClause(c.Pruned), ApplyCRD)
	case len(c.Pruned) > 0:
		v.Hold, v.Reason = true, ReasonOutdatedCRD
		v.Message = fmt.Sprintf("the JobSet CRD %s is inplace's but older than this manager%s: "+
			"inplace reconciles no JobSet until the CRD is upgraded: %s (see docs/how-to/upgrade.md)",
			CRDName, prunedClause(c.Pruned), ApplyCRD)
	case len(in.Dropped) > 0 || in.ProbeFailed != "":
		v.Hold, v.Reason = true, ReasonSchemaNotServed
		what := "still drops " + strings.Join(in.Dropped, ", ") + " from a status write (dry run)"
		if len(in.Dropped) == 0 {
			what = "did not answer the dry-run status write that tells whether it serves the CRD's schema: " + in.ProbeFailed
		}
		since := in.Now.Sub(in.UnservedSince)
		v.Transient = since < SchemaGrace
		v.Message = fmt.Sprintf("the JobSet CRD %s keeps every status field inplace writes, but the API server %s; "+
			"inplace resumes once the API server serves the CRD's schema, as it does within moments of the CRD's change",
			CRDName, what)
		if !v.Transient {
			v.Message += fmt.Sprintf(". It has not for %s: check that every kube-apiserver is ready (kubectl get --raw '/readyz?verbose' against each)", since.Round(time.Second))
		}
	case !c.Ours:
		v.Message = fmt.Sprintf("the JobSet CRD %s keeps every status field inplace writes but lacks the label %s=%s (inplace's from an earlier release, say): "+
			"apply this release's: %s (see docs/how-to/upgrade.md); upstream JobSet's controller is not running",
			CRDName, jobset.CRDOwnerLabel, jobset.CRDOwner, ApplyCRD)
	default:
		v.Message = fmt.Sprintf("the JobSet CRD is inplace's and upstream JobSet's controller is not running (no Lease %s held in namespace %s)",
			strings.Join(UpstreamLeaseNames, " or "), in.Namespace)
	}
	return v
}

func prunedClause(pruned []string) string {
	if len(pruned) == 0 {
		return ""
	}
	return fmt.Sprintf(", and its schema lacks %s, which the API server would drop from every status write", strings.Join(pruned, ", "))
}

// podOf is the Pod's name in a controller-runtime holder identity
// ("<pod>_<uuid>").
func podOf(holder string) string {
	pod, _, _ := strings.Cut(holder, "_")
	return pod
}
