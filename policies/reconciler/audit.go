package reconciler

import (
	"context"
	"encoding/json"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
	"github.com/inplace-dev/inplace/policies"
)

// maxListedViolations caps the violations a policy's status lists.
const maxListedViolations = 20

// Auditor evaluates every existing JobSet against the admin policies in
// force and records the violations in each policy's status.
type Auditor struct {
	Client   client.Client
	Engine   *policies.Engine
	Interval time.Duration
	Clock    clock.PassiveClock
	// Metrics receives the violations found; nil counts nothing.
	Metrics *Metrics
}

var _ manager.LeaderElectionRunnable = &Auditor{}

// NeedLeaderElection: one replica audits.
func (a *Auditor) NeedLeaderElection() bool { return true }

// Start audits every Interval until ctx ends.
func (a *Auditor) Start(ctx context.Context) error {
	if a.Clock == nil {
		a.Clock = clock.RealClock{}
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := a.Audit(ctx); err != nil {
			log.FromContext(ctx).Error(err, "policy audit")
		}
	}, a.Interval)
	return nil
}

// Audit runs one audit.
func (a *Auditor) Audit(ctx context.Context) error {
	var list policyv1alpha1.JobSetPolicyList
	if err := a.Client.List(ctx, &list); err != nil {
		return err
	}
	if len(list.Items) == 0 {
		return nil
	}
	var jobsets jobset.JobSetList
	if err := a.Client.List(ctx, &jobsets); err != nil {
		return err
	}
	found := map[string][]policyv1alpha1.AuditViolation{}
	for i := range jobsets.Items {
		js := &jobsets.Items[i]
		raw, err := json.Marshal(js)
		if err != nil {
			return err
		}
		var obj map[string]any
		if err := json.Unmarshal(raw, &obj); err != nil {
			return err
		}
		d, _ := a.Engine.EvaluateAdmin(ctx, policies.Input{Operation: "AUDIT", Object: obj, Namespace: js.Namespace, Labels: js.Labels})
		for _, group := range [][]policies.Violation{d.Denied, d.Warned, d.DryRun} {
			for _, v := range group {
				found[v.Policy] = append(found[v.Policy], policyv1alpha1.AuditViolation{Namespace: js.Namespace, Name: js.Name, Message: v.Message})
			}
		}
	}
	now := metav1.NewTime(a.Clock.Now())
	for i := range list.Items {
		p := &list.Items[i]
		v := found[p.Name]
		a.Metrics.setAuditViolations(p.Name, len(v))
		audit := &policyv1alpha1.AuditStatus{LastRun: now, TotalViolations: int32(len(v)), Violations: v[:min(len(v), maxListedViolations)]}
		if p.Status.Audit != nil && equality.Semantic.DeepEqual(p.Status.Audit.Violations, audit.Violations) &&
			p.Status.Audit.TotalViolations == audit.TotalViolations && now.Sub(p.Status.Audit.LastRun.Time) < 10*a.Interval {
			// Nothing new: skip the write, refreshing lastRun only now and
			// then so that a steady cluster does not write every interval.
			continue
		}
		patch := client.MergeFrom(p.DeepCopy())
		p.Status.Audit = audit
		if err := a.Client.Status().Patch(ctx, p, patch); err != nil {
			return err
		}
	}
	return nil
}
