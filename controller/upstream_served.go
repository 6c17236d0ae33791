package controller

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/coexist"
)

// probeAttempts bounds the dry runs of one probe that lose a race with
// another write of the JobSet they took.
const probeAttempts = 3

// served fills in.Dropped (or in.ProbeFailed) and in.UnservedSince, under
// checking, when the verdict on in would let the controller run on a CRD
// whose schema the API server was not yet seen to serve: the
// kube-apiserver takes up a replaced CRD's schema a moment after the
// write, and until then prunes from every status written what the schema
// it had lacks. Upstream's CRD replaced by ours, a status written in that
// moment would lose the epochs and the count of in-place restarts, and the
// JobSet would read as upstream's again. Seen served once, a CRD's version
// is not probed again; with no JobSet to write through, it is probed at
// each check until there is one.
func (g *UpstreamGate) served(ctx context.Context, in *coexist.Input) {
	if g.opts.StatusWriter == nil || g.crdVersion == "" || g.crdVersion == g.servedVersion {
		return
	}
	probe := *in
	probe.Now = g.opts.Clock.Now()
	if coexist.Decide(probe).Hold {
		// Held for another reason: the wait for the schema, if it comes
		// again, is counted from then.
		g.unservedSince = time.Time{}
		return
	}
	probeCtx, cancel := context.WithTimeout(ctx, gateReadTimeout)
	defer cancel()
	dropped, probed, err := ProbeServedSchema(probeCtx, g.reader, g.opts.StatusWriter)
	switch {
	case err == nil && !probed:
		return
	case err == nil && len(dropped) == 0:
		g.servedVersion, g.unservedSince = g.crdVersion, time.Time{}
		return
	case err == nil:
		in.Dropped = dropped
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) || apierrors.IsMethodNotSupported(err):
		// The API server refused the dry run itself: it will refuse it
		// again, and holding every JobSet on a safeguard that cannot run
		// would be worse than the moment it guards. Go on the CRD's word.
		msg := "the API server refused the dry-run status write that tells whether it serves the JobSet CRD's schema; the controller goes on the CRD's word: " + err.Error()
		log.FromContext(ctx).WithName("upstream-jobset").Error(err, "cannot tell whether the API server serves the JobSet CRD's schema: the controller goes on the CRD's word", "reason", coexist.ReasonSchemaUnchecked)
		if g.crdObject != nil {
			g.recorder.Eventf(g.crdObject, nil, corev1.EventTypeWarning, coexist.ReasonSchemaUnchecked, "Check", "%s", msg)
		}
		g.servedVersion, g.unservedSince = g.crdVersion, time.Time{}
		return
	default:
		in.ProbeFailed = err.Error()
	}
	if g.unservedSince.IsZero() {
		g.unservedSince = probe.Now
	}
	in.UnservedSince = g.unservedSince
}

// The probe lists a JobSet past the cache and writes its status in a dry run.
// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets,verbs=list
// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets/status,verbs=update

// ProbeServedSchema writes the status of one JobSet, listed through
// reader, in a dry run through writer, each counter moved on
// (coexist.ServedProbe), and returns those the API server's answer
// dropped: none once it serves a schema that keeps them all. With no
// JobSet there is nothing to write through: probed is false.
func ProbeServedSchema(ctx context.Context, reader client.Reader, writer client.SubResourceWriter) (dropped []string, probed bool, err error) {
	for range probeAttempts {
		var list jobset.JobSetList
		if err := reader.List(ctx, &list, client.Limit(1)); err != nil {
			return nil, false, err
		}
		if len(list.Items) == 0 {
			return nil, false, nil
		}
		js := &list.Items[0]
		sent := coexist.ServedProbe(js.Status)
		js.Status = *sent.DeepCopy()
		err := writer.Update(ctx, js, client.DryRunAll)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		return coexist.Dropped(sent, js.Status), true, nil
	}
	return nil, false, errors.New("every JobSet taken changed before its dry run")
}
