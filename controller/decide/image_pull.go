package decide

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/state"
)

// An InPlaceRestart JobSet's Pods wait for every agent to report an epoch
// before any worker starts, and nothing bounds that wait on a first start:
// an agent whose image the kubelet cannot pull never reports, and the
// JobSet waits with nothing on it that says why (during an in-place
// restart the timeout ends the wait, by a recreation that meets the same
// image). A worker that cannot have its image keeps its Pod's share of the
// group from running just as well, after the barrier lifted. The
// ImagePullFailure condition says so, from the Pods of the current
// attempt:
//
//	no Pod waits on an image ──▶ nothing (or False, ImagePullResolved, if it was True)
//	an agent waits ──────────▶ True, AgentImagePullFailed
//	else a worker waits ─────▶ True, WorkerImagePullFailed
//
// It fails nothing and restarts nothing: the kubelet keeps retrying, and
// an image pushed late, or a pull secret added, lets the Pods start.

// imagePullNames is how many Pods the condition names; the rest are
// counted.
const imagePullNames = 3

// imagePullFailure is what the condition says: the container and image of
// the first Pod that waits (agents before workers), and every Pod waiting
// for the same one.
type imagePullFailure struct {
	state.ImagePull
	// first is the first Pod by name, whose kubelet message is quoted.
	first, message string
	// n counts the Pods waiting for the same container's image; names are
	// the first imagePullNames of them by name.
	n     int
	names []string
	// others counts the Pods that wait for another image.
	others int
}

// imagePullFailureOf finds, among the groups of Pods of the current
// attempt, those that wait for an image; nil if none does. Pods failed or
// being deleted are left out: they will not start anyway. The condition
// names the agent's image if any agent waits (every other container of its
// Pod waits behind it), else the image of the first Pod by name; the Pods
// of several classes (several reasons, say) wait for the same one.
func imagePullFailureOf(pods []state.PodGroup) *imagePullFailure {
	var f *imagePullFailure
	total := 0
	for _, g := range pods {
		if g.ImagePull.Reason == "" || g.Gone {
			continue
		}
		total += g.N()
		first := g.First()
		if f == nil || (g.ImagePull.Agent && !f.Agent) || (g.ImagePull.Agent == f.Agent && first < f.first) {
			f = &imagePullFailure{ImagePull: g.ImagePull, first: first, message: g.ImagePullMessage}
		}
	}
	if f == nil {
		return nil
	}
	for _, g := range pods {
		if g.ImagePull.Reason == "" || g.Gone || !sameImage(g.ImagePull, f.ImagePull) {
			continue
		}
		f.n += g.N()
		f.names = smallest(f.names, g.Names, imagePullNames)
	}
	f.others = total - f.n
	return f
}

// sameImage reports whether two waits are for the same container's image,
// whatever the kubelet's reason.
func sameImage(a, b state.ImagePull) bool {
	return a.Agent == b.Agent && a.Container == b.Container && a.Image == b.Image
}

// smallest merges names into kept, the k smallest names so far, in order,
// without sorting every name: a group may hold thousands of Pods.
func smallest(kept []string, names map[string]struct{}, k int) []string {
	for name := range names {
		if len(kept) == k && name >= kept[k-1] {
			continue
		}
		i, _ := slices.BinarySearch(kept, name)
		kept = slices.Insert(kept, i, name)
		if len(kept) > k {
			kept = kept[:k]
		}
	}
	return kept
}

// reason is the condition's reason: whose image it is.
func (f *imagePullFailure) reason() string {
	if f.Agent {
		return ReasonAgentImagePullFailed
	}
	return ReasonWorkerImagePullFailed
}

// text is the condition's message: the image, the Pods, the kubelet's
// words, what follows and what to do, which depends on whether a retry
// can help.
func (f *imagePullFailure) text() string {
	var b strings.Builder
	if f.Agent {
		fmt.Fprintf(&b, "the agent image %q cannot be pulled", f.Image)
	} else {
		fmt.Fprintf(&b, "the image %q of container %s cannot be pulled", f.Image, f.Container)
	}
	pods := strings.Join(f.names, ", ")
	if more := f.n - len(f.names); more > 0 {
		pods += fmt.Sprintf(" and %d more", more)
	}
	fmt.Fprintf(&b, ": %s for it (%s); Pod %s: %s", podsWait(f.n), pods, f.first, f.Reason)
	if f.message != "" {
		fmt.Fprintf(&b, ": %s", f.message)
	}
	if f.others > 0 {
		fmt.Fprintf(&b, "; %d more for other images", f.others)
	}
	if f.Agent {
		b.WriteString(". The JobSet cannot start, nor end an in-place restart, until every agent runs")
	} else {
		b.WriteString(". The workers of those Pods cannot start")
	}
	// Where the image comes from: the agent's is the manager's
	// configuration, injected when the JobSet was created, so a JobSet
	// keeps the image it was created with.
	source, fix := "the image in the JobSet's Pod template", "recreate the JobSet with a valid image"
	if f.Agent {
		source, fix = "agent.image in the manager's configuration", "fix agent.image in the manager's configuration and recreate the JobSet, whose agent is injected when it is created"
	}
	switch {
	case f.NeverPulled():
		fmt.Fprintf(&b, "; the kubelet does not pull it (imagePullPolicy Never) and starts the container once the image is on the node: load it onto the nodes, or check %s", source)
	case !f.Retried():
		fmt.Fprintf(&b, "; the name does not parse, which no retry cures: %s", fix)
	default:
		fmt.Fprintf(&b, "; the kubelet keeps retrying. Check %s and the imagePullSecrets of service account %s (a Pod takes them when it is created); a wrong image needs the JobSet recreated", source, f.ServiceAccount)
	}
	return b.String()
}

// podsWait says how many Pods wait.
func podsWait(n int) string {
	if n == 1 {
		return "1 Pod waits"
	}
	return fmt.Sprintf("%d Pods wait", n)
}

// reportImagePulls sets the ImagePullFailure condition from the Pods of
// the current attempt, with a Warning Event when it turns True or changes
// its reason (not when only the count of Pods or the kubelet's words
// change), and a Normal one when it is resolved. A JobSet whose Pods never
// waited for an image gets no condition at all.
func (p *Plan) reportImagePulls(pods []state.PodGroup, now metav1.Time) {
	cur := meta.FindStatusCondition(p.Status.Conditions, string(jobset.JobSetImagePullFailure))
	was := ""
	if cur != nil && cur.Status == metav1.ConditionTrue {
		was = cur.Reason
	}
	f := imagePullFailureOf(pods)
	if f == nil {
		if was != "" {
			setCondition(&p.Status, jobset.JobSetImagePullFailure, metav1.ConditionFalse, ReasonImagePullResolved, MessageImagePullResolved, now)
			p.Events = append(p.Events, Event{corev1.EventTypeNormal, ReasonImagePullResolved, MessageImagePullResolved})
		}
		return
	}
	reason, msg := f.reason(), f.text()
	setCondition(&p.Status, jobset.JobSetImagePullFailure, metav1.ConditionTrue, reason, msg, now)
	if was != reason {
		p.Events = append(p.Events, Event{corev1.EventTypeWarning, reason, msg})
	}
}
