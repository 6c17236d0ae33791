package migration

import (
	"fmt"
	"strings"
	"time"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/coexist"
)

// Severity of a finding.
type Severity int

const (
	// Done: this step is done.
	Done Severity = iota
	// Warning: nothing blocks, but the step changes something to know of.
	Warning
	// Blocking: the migration cannot go on (or is not over) until this is
	// done.
	Blocking
)

func (s Severity) String() string {
	return [...]string{"done", "warning", "BLOCKS"}[s]
}

// Finding is one line of the check: a step of docs/how-to/migrate-from-jobset.md
// or one JobSet, and what of it blocks, is done, or warns.
type Finding struct {
	Severity Severity
	// Step names the step of the procedure (or the JobSet) it is about.
	Step    string
	Message string
}

// Steps of docs/how-to/migrate-from-jobset.md, in its order.
const (
	StepUpstreamController = "1. upstream controller stopped"
	StepUpstreamWebhooks   = "2. upstream webhooks removed"
	StepCRD                = "3. JobSet CRD is inplace's"
	StepInplace            = "4. inplace installed and ready"
	StepJobSets            = "5. JobSets"
)

// Check lists what blocks the migration and what is done, from what was
// read of the cluster.
func Check(in Inputs) []Finding {
	var out []Finding
	add := func(s Severity, step, format string, args ...any) {
		out = append(out, Finding{Severity: s, Step: step, Message: fmt.Sprintf(format, args...)})
	}

	// 1. Upstream's controller: its Deployment at 0 and its Lease lapsed.
	// A Deployment scaled to 0 can still have a Pod terminating, and a
	// stopped controller's Lease stays held until it lapses.
	running := false
	for _, d := range in.Upstream {
		if d.Replicas > 0 || d.Running > 0 {
			running = true
			add(Blocking, StepUpstreamController, "Deployment %s/%s has %d replica(s), %d running: scale it to 0 (kubectl -n %s scale deployment %s --replicas=0); the Jobs and Pods of its JobSets keep running",
				d.Namespace, d.Name, d.Replicas, d.Running, d.Namespace, d.Name)
		}
	}
	for _, l := range in.Leases {
		if l.Held {
			running = true
			add(Blocking, StepUpstreamController, "Lease %s/%s is held by %s, renewed %s ago: upstream's controller still leads; it lapses at %s, %s after its last renewal by a stopped controller",
				l.Namespace, l.Name, l.Holder, in.Now.Sub(l.Renewed).Round(time.Second), l.Expires.UTC().Format(time.RFC3339), l.Expires.Sub(l.Renewed))
		}
	}
	if !running {
		add(Done, StepUpstreamController, "no replica of %s and no Lease %s held in %s", strings.Join(coexist.UpstreamDeployments, " or "), strings.Join(coexist.UpstreamLeaseNames, " or "), in.UpstreamNamespace)
	}

	// 2. Upstream's webhook configurations: with its Service gone, their
	// failurePolicy Fail refuses every JobSet write and every creation of a
	// JobSet's Pod.
	if len(in.Webhooks) > 0 {
		add(Blocking, StepUpstreamWebhooks, "%s remain: with upstream's webhook Service stopped they refuse every write of a JobSet and every creation of its Pods; delete them (kubectl delete %s)",
			strings.Join(in.Webhooks, " and "), strings.Join(in.Webhooks, " "))
	} else {
		add(Done, StepUpstreamWebhooks, "no %s or %s", coexist.UpstreamMutatingWebhook, coexist.UpstreamValidatingWebhook)
	}

	// 3. The CRD, as the manager judges it.
	switch v := coexist.Decide(coexist.Input{CRD: in.CRD, Namespace: in.UpstreamNamespace, Now: in.Now}); {
	case v.Hold:
		add(Blocking, StepCRD, "%s", v.Message)
	case !in.CRD.Ours:
		add(Warning, StepCRD, "%s", v.Message)
	default:
		add(Done, StepCRD, "%s serves every status field inplace writes", coexist.CRDName)
	}

	// 4. inplace's Deployments, available.
	for _, d := range in.Manager {
		switch {
		case !d.Found:
			add(Blocking, StepInplace, "no Deployment %s/%s: install inplace (kubectl apply --server-side -k config/default, or the chart; docs/how-to/install.md)", d.Namespace, d.Name)
		case d.Available == 0:
			add(Blocking, StepInplace, "Deployment %s/%s has no available replica: its readiness check says why (kubectl -n %s describe pods), upstream-jobset among them while upstream's controller runs or the CRD is not inplace's", d.Namespace, d.Name, d.Namespace)
		default:
			add(Done, StepInplace, "Deployment %s/%s: %d of %d replica(s) available", d.Namespace, d.Name, d.Available, d.Replicas)
		}
	}

	// 5. The JobSets: nothing blocks, but some change.
	unfinished := 0
	var notes []Finding
	for _, j := range in.JobSets {
		if !jobset.Finished(&j.JobSet.Status) {
			unfinished++
		}
		for _, n := range jobSetNotes(j) {
			notes = append(notes, Finding{Severity: Warning, Step: "JobSet " + j.JobSet.Namespace + "/" + j.JobSet.Name, Message: n})
		}
	}
	add(Done, StepJobSets, "%d JobSet(s), %d not finished, keep their UID, spec and status through the CRD's replacement", len(in.JobSets), unfinished)
	return append(out, notes...)
}

// Blocked counts the blocking findings.
func Blocked(fs []Finding) int {
	n := 0
	for _, f := range fs {
		if f.Severity == Blocking {
			n++
		}
	}
	return n
}
