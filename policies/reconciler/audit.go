package reconciler

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
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
	"github.com/inplace-dev/inplace/policies/report"
	"github.com/inplace-dev/inplace/policies/review"
)

// maxListedViolations caps the violations a policy's status lists.
const maxListedViolations = 20

// Auditor evaluates every existing JobSet against the admin policies in
// force and records the violations in each policy's status.
type Auditor struct {
	// Client reads the JobSets from the manager's cache, without a copy:
	// in a process that runs the JobSet controller too, the cache holds
	// them already; an admission server alone caches them for the audit.
	Client   client.Client
	Engine   *policies.Engine
	Interval time.Duration
	Clock    clock.PassiveClock
	// Metrics receives the violations found; nil counts nothing.
	Metrics *Metrics
	// Workers evaluate JobSets in parallel; 0 means half the CPUs, at
	// least one: the audit runs in the process that serves admission.
	Workers int
	// Budget bounds one audit; 0 means Interval. An audit out of time
	// records what it found, marked incomplete.
	Budget time.Duration
	// Reports, if set, writes what every complete audit found into
	// PolicyReports, one per namespace; nil writes none.
	Reports *report.Writer
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

// Audit runs one audit: every JobSet against every admin policy, in
// parallel, within the budget. Memory is bounded by the policies, not by
// the JobSets: each policy keeps its count and its first
// maxListedViolations violations (by namespace, name and message), the
// reports keep at most report.DefaultMaxResults results per namespace,
// and a JobSet's input lives only while it is evaluated.
//
// It writes each policy's status, then, if the audit reached every
// JobSet, the PolicyReports: an incomplete audit leaves them as they were,
// since a namespace it did not reach would lose its results.
func (a *Auditor) Audit(ctx context.Context) error {
	var list policyv1alpha1.JobSetPolicyList
	if err := a.Client.List(ctx, &list); err != nil {
		return err
	}
	if len(list.Items) == 0 {
		// No policy, so no result: the reports of the last ones go.
		return a.writeReports(ctx, &report.Results{})
	}
	start := a.Clock.Now()
	budget := a.Budget
	if budget <= 0 {
		budget = a.Interval
	}
	var jobsets jobset.JobSetList
	// The cache's own objects: read, never written.
	if err := a.Client.List(ctx, &jobsets, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	var results *report.Results
	if a.Reports != nil {
		results = &report.Results{}
	}
	found, complete := a.evaluateInto(ctx, jobsets.Items, budget, results, actions(list.Items))
	if !complete {
		log.FromContext(ctx).Info("policy audit out of time: recording what it found, leaving the policy reports as they were", "budget", budget, "jobsets", len(jobsets.Items))
	}
	a.Metrics.observeAudit(a.Clock.Since(start), len(jobsets.Items), complete)

	err := a.writeStatus(ctx, list.Items, found, complete)
	if !complete {
		return err
	}
	return errors.Join(err, a.writeReports(ctx, results))
}

// writeStatus records in each policy's status what the audit found of it.
func (a *Auditor) writeStatus(ctx context.Context, items []policyv1alpha1.JobSetPolicy, found map[string]*policyFindings, complete bool) error {
	now := metav1.NewTime(a.Clock.Now())
	for i := range items {
		p := &items[i]
		f := found[p.Name]
		if f == nil {
			f = &policyFindings{}
		}
		a.Metrics.setAuditViolations(p.Name, f.total)
		audit := &policyv1alpha1.AuditStatus{LastRun: now, TotalViolations: int32(f.total), Violations: f.first, Incomplete: !complete}
		if p.Status.Audit != nil && equality.Semantic.DeepEqual(p.Status.Audit.Violations, audit.Violations) &&
			p.Status.Audit.TotalViolations == audit.TotalViolations && p.Status.Audit.Incomplete == audit.Incomplete &&
			now.Sub(p.Status.Audit.LastRun.Time) < 10*a.Interval {
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

// writeReports hands the results of a complete audit to the report
// writer, if there is one.
func (a *Auditor) writeReports(ctx context.Context, results *report.Results) error {
	if a.Reports == nil {
		return nil
	}
	if err := a.Reports.Write(ctx, results); err != nil {
		return fmt.Errorf("writing the policy reports: %w", err)
	}
	return nil
}

// actions are the enforcement actions of the policies, by name, as their
// results in the reports state them.
func actions(items []policyv1alpha1.JobSetPolicy) map[string]string {
	out := make(map[string]string, len(items))
	for i := range items {
		out[items[i].Name] = string(cmp.Or(items[i].Spec.EnforcementAction, policyv1alpha1.Deny))
	}
	return out
}

// DefaultAuditWorkers is how many JobSets an audit evaluates at once
// unless told: half the CPUs, at least one, since the audit shares its
// process with admission.
func DefaultAuditWorkers() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// policyFindings are one policy's violations: how many, and the first
// ones in a stable order, so that an unchanged cluster writes nothing.
type policyFindings struct {
	total int
	first []policyv1alpha1.AuditViolation
}

func (f *policyFindings) add(v policyv1alpha1.AuditViolation) {
	f.total++
	i, _ := slices.BinarySearchFunc(f.first, v, compareViolations)
	if i >= maxListedViolations {
		return
	}
	f.first = slices.Insert(f.first, i, v)
	if len(f.first) > maxListedViolations {
		f.first = f.first[:maxListedViolations]
	}
}

func compareViolations(a, b policyv1alpha1.AuditViolation) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Message, b.Message))
}

// evaluate runs the policies on the JobSets with Workers goroutines until
// done or out of budget, and reports whether it reached every JobSet.
func (a *Auditor) evaluate(ctx context.Context, items []jobset.JobSet, budget time.Duration) (map[string]*policyFindings, bool) {
	return a.evaluateInto(ctx, items, budget, nil, nil)
}

// evaluateInto is evaluate that, given results, also gathers there every
// result of every policy on every JobSet for the reports, with the
// policies' actions.
func (a *Auditor) evaluateInto(ctx context.Context, items []jobset.JobSet, budget time.Duration, results *report.Results, actions map[string]string) (map[string]*policyFindings, bool) {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	workers := a.Workers
	if workers <= 0 {
		workers = DefaultAuditWorkers()
	}
	var (
		mu    sync.Mutex
		found = map[string]*policyFindings{}
		next  atomic.Int64
		wg    sync.WaitGroup
	)
	for range min(workers, len(items)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(items) || ctx.Err() != nil {
					return
				}
				js := &items[i]
				obj, err := asInput(js)
				if err != nil {
					log.FromContext(ctx).Error(err, "converting a JobSet for the audit", "jobset", js.Namespace+"/"+js.Name)
					continue
				}
				d, _ := a.Engine.Audit(ctx, review.Offline(policies.OperationAudit, js.Namespace, obj, nil, nil))
				if ctx.Err() != nil {
					return // cut short: its evaluations say nothing
				}
				var forReport []report.Result
				if results != nil {
					forReport = report.FromDecision(report.JobSet{Namespace: js.Namespace, Name: js.Name, UID: js.UID}, d, actions)
				}
				mu.Lock()
				if results != nil {
					results.Add(forReport...)
				}
				for _, group := range [][]policies.Violation{d.Denied, d.Warned, d.DryRun} {
					for _, v := range group {
						f := found[v.Policy]
						if f == nil {
							f = &policyFindings{}
							found[v.Policy] = f
						}
						f.add(policyv1alpha1.AuditViolation{Namespace: js.Namespace, Name: js.Name, Message: v.Message})
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return found, next.Load() >= int64(len(items)) && ctx.Err() == nil
}

// asInput is a JobSet as the webhooks give it to the policies: its JSON,
// with its apiVersion and kind, which the cache's typed objects leave
// empty (a policy that checks input.object.kind would otherwise pass every
// JobSet in the audit that admission denies).
func asInput(js *jobset.JobSet) (map[string]any, error) {
	raw, err := json.Marshal(js)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	obj["apiVersion"], obj["kind"] = jobset.GroupVersion.String(), jobset.Kind
	return obj, nil
}
