package controller

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/coexist"
)

// probeAttempts bounds the dry runs of one probe that lose a race with
// another write of the JobSet they took.
const probeAttempts = 3

// served fills in.Dropped, under checking, when the verdict on in would
// let the controller run on a CRD whose schema the API server was not
// yet seen to serve: the kube-apiserver takes up a replaced CRD's schema
// a moment after the write, and until then prunes from every status
// written what the schema it had lacks. Upstream's CRD replaced by ours,
// a status written in that moment would lose the epochs and the count of
// in-place restarts, and the JobSet would read as upstream's again.
// Seen served once, a CRD's version is not probed again.
func (g *UpstreamGate) served(ctx context.Context, in *coexist.Input) error {
	if g.opts.StatusWriter == nil || g.crdVersion == "" || g.crdVersion == g.servedVersion {
		return nil
	}
	probe := *in
	probe.Now = g.opts.Clock.Now()
	if coexist.Decide(probe).Hold {
		return nil
	}
	probeCtx, cancel := context.WithTimeout(ctx, gateReadTimeout)
	defer cancel()
	dropped, err := ProbeServedSchema(probeCtx, g.reader, g.opts.StatusWriter)
	if err != nil {
		return fmt.Errorf("writing a JobSet's status in a dry run, to see whether the API server serves the JobSet CRD's schema: %w", err)
	}
	in.Dropped = dropped
	if len(dropped) == 0 {
		g.servedVersion = g.crdVersion
	}
	return nil
}

// The probe lists a JobSet past the cache and writes its status in a dry run.
// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets,verbs=list
// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets/status,verbs=update

// ProbeServedSchema writes the status of one JobSet, listed through
// reader, in a dry run through writer, each counter moved on
// (coexist.ServedProbe), and returns those the API server's answer
// dropped: none once it serves a schema that keeps them all. With no
// JobSet there is nothing to write through, and nothing a write could
// lose yet: it returns none.
func ProbeServedSchema(ctx context.Context, reader client.Reader, writer client.SubResourceWriter) ([]string, error) {
	for range probeAttempts {
		var list jobset.JobSetList
		if err := reader.List(ctx, &list, client.Limit(1)); err != nil {
			return nil, err
		}
		if len(list.Items) == 0 {
			return nil, nil
		}
		js := &list.Items[0]
		sent := coexist.ServedProbe(js.Status)
		js.Status = *sent.DeepCopy()
		err := writer.Update(ctx, js, client.DryRunAll)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return coexist.Dropped(sent, js.Status), nil
	}
	return nil, errors.New("every JobSet taken changed before its dry run: trying again")
}
