package decide

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

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

// imagePullNames is how many Pods the Event names; the rest are counted.
const imagePullNames = 3

// imagePullFailure is what the condition and its Event say: the container
// and image of the first Pod that waits (agents before workers), and every
// Pod waiting for the same one.
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

// Bounds on what the condition and its Event say. A condition's message
// may hold 32768 characters and an Event's note 1024 bytes; either too
// long fails its write, and a status write that fails stops every status
// change of the JobSet. Text from outside (the image as the Pod names it,
// the kubelet's message) is cut at quotedText.
const (
	quotedText          = 256
	maxConditionMessage = 1024
	maxEventMessage     = 1024
)

// clip cuts s to at most n bytes, on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "..."
	if n < len(mark) {
		return ""
	}
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// subject says whose image cannot be pulled: the agent's, or a worker
// container's.
func (f *imagePullFailure) subject() string {
	if f.Agent {
		return fmt.Sprintf("the agent image %q cannot be pulled", clip(f.Image, quotedText))
	}
	return fmt.Sprintf("the image %q of container %s cannot be pulled", clip(f.Image, quotedText), clip(f.Container, quotedText))
}

// advice says what follows and what to do, which depends on whether a
// retry can help.
func (f *imagePullFailure) advice() string {
	var b strings.Builder
	if f.Agent {
		b.WriteString(". The JobSet cannot start, nor end an in-place restart, until every agent runs")
	} else {
		b.WriteString(". The workers of the Pods that wait for it cannot start")
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
		fmt.Fprintf(&b, "; imagePullPolicy is Never, so no retry pulls it: the kubelet starts the container once the image is on the node. Load it onto the nodes, or check %s", source)
	case !f.Retried():
		fmt.Fprintf(&b, "; the name does not parse, which no retry cures: %s", fix)
	default:
		fmt.Fprintf(&b, "; the kubelet keeps retrying. Check %s and the imagePullSecrets of the Pods' service account (a Pod takes them when it is created); a wrong image needs the JobSet recreated", source)
	}
	return b.String()
}

// text is the condition's message: the image, whose it is, and whether a
// retry can help. It says nothing that changes while the Pods wait (how
// many, the kubelet's reason, which flips between ErrImagePull and
// ImagePullBackOff at every back-off, or its words), so that the condition
// is not written again for each: the Event says those.
func (f *imagePullFailure) text() string {
	return clip(f.subject()+f.advice(), maxConditionMessage)
}

// event is the Warning Event's message, said when the condition turns
// True or says something else: the condition's, with the Pods that wait,
// the first one's kubelet reason and message, and their service account.
func (f *imagePullFailure) event() string {
	var b strings.Builder
	pods := strings.Join(f.names, ", ")
	if more := f.n - len(f.names); more > 0 {
		pods += fmt.Sprintf(" and %d more", more)
	}
	fmt.Fprintf(&b, ": %s for it (%s); Pod %s: %s", podsWait(f.n), pods, f.first, f.Reason)
	if f.message != "" {
		fmt.Fprintf(&b, ": %s", clip(f.message, quotedText))
	}
	if f.others > 0 {
		fmt.Fprintf(&b, "; %d more for other images", f.others)
	}
	fmt.Fprintf(&b, "; service account %s", f.ServiceAccount)
	subject, advice := f.subject(), f.advice()
	// The details give way first: the condition says the rest.
	details := clip(b.String(), max(maxEventMessage-len(subject)-len(advice), 0))
	return clip(subject+details+advice, maxEventMessage)
}

// podsWait says how many Pods wait.
func podsWait(n int) string {
	if n == 1 {
		return "1 Pod waits"
	}
	return fmt.Sprintf("%d Pods wait", n)
}

// reportImagePulls sets the ImagePullFailure condition from the Pods of
// the current attempt, with a Warning Event when it turns True or says
// something else (another reason, image or container; not when only the
// count of Pods or the kubelet's reason or words change, which the
// message leaves out), and a Normal one when it is resolved. A JobSet
// whose Pods never waited for an image gets no condition at all.
func (p *Plan) reportImagePulls(pods []state.PodGroup, now metav1.Time) {
	cur := meta.FindStatusCondition(p.Status.Conditions, string(jobset.JobSetImagePullFailure))
	wasTrue := cur != nil && cur.Status == metav1.ConditionTrue
	f := imagePullFailureOf(pods)
	if f == nil {
		if wasTrue {
			setCondition(&p.Status, jobset.JobSetImagePullFailure, metav1.ConditionFalse, ReasonImagePullResolved, MessageImagePullResolved, now)
			p.Events = append(p.Events, Event{corev1.EventTypeNormal, ReasonImagePullResolved, MessageImagePullResolved})
		}
		return
	}
	reason, msg := f.reason(), f.text()
	if !wasTrue || cur.Reason != reason || cur.Message != msg {
		p.Events = append(p.Events, Event{corev1.EventTypeWarning, reason, f.event()})
	}
	setCondition(&p.Status, jobset.JobSetImagePullFailure, metav1.ConditionTrue, reason, msg, now)
}
