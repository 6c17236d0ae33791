package decide

import (
	"time"

	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// AgentGrantWait bounds how long the Jobs of a new InPlaceRestart JobSet
// wait for its agents' grants. Past it they are created anyway, with a
// Warning: a grant that cannot be written (the manager's own RBAC, say)
// then shows as agents refused, not as a JobSet that never starts.
const AgentGrantWait = 30 * time.Second

// AgentGrantWaitLeft is how much longer js's Jobs may wait for its agents'
// grants: AgentGrantWait from its creation or from the controller's start
// (started), whichever is later (a clock behind the apiserver's waits no
// longer than AgentGrantWait). Zero or less: the wait is over.
func AgentGrantWaitLeft(js *jobset.JobSet, started, now time.Time) time.Duration {
	from := js.CreationTimestamp.Time
	if started.After(from) {
		from = started
	}
	return AgentGrantWait - max(now.Sub(from), 0)
}

// awaitAgentGrants holds back the Jobs of a new InPlaceRestart JobSet
// until its agents' grants name it (Observed.AgentGrantsMissing): the
// agent-rbac controller writes them when the JobSet appears, and Pods that
// started before would have their first watch of the broadcast refused and
// wait out a retry's backoff behind their barrier. It waits at most
// AgentGrantWaitLeft, and has the JobSet reconciled again when the wait
// ends; the grants' change reconciles it sooner (the controller's watch of
// them). Past the wait the Jobs are created, and the plan says that they
// are created without the grants (CreateWithoutAgentGrants).
//
// It changes only what the plan creates, once every other step decided.
// Jobs created suspended run no Pod, and wait for nothing; a resume is not
// held back, since the grants were written when the JobSet appeared (an
// agent refused retries with backoff).
func (p *Plan) awaitAgentGrants(js *jobset.JobSet, obs Observed, now time.Time) {
	if len(p.CreateJobs) == 0 || !jobset.InPlaceActive(js) || ptr.Deref(js.Spec.Suspend, false) || !obs.AgentGrantsMissing {
		return
	}
	if left := AgentGrantWaitLeft(js, obs.ControllerStarted, now); left > 0 {
		p.CreateJobs = nil
		p.AwaitingAgentGrants = left
		p.RequeueWithin(left)
		return
	}
	p.CreateWithoutAgentGrants = true
}
