package decide

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
)

const (
	agentImage  = "registry.example/inplace-agent:v1"
	workerImage = "registry.example/trainer:1"
)

// agentPod is a Pod of js's first attempt as the kubelet shows it: its
// agent (named as the webhook names it) and its worker trainer, each
// running unless waiting names a waiting reason for it.
func agentPod(name, rj string, agentWaiting, workerWaiting string) corev1.Pod {
	state := func(reason string) corev1.ContainerState {
		if reason == "" {
			return corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		}
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: reason + " on " + name}}
	}
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{jobset.ReplicatedJobNameKey: rj, jobset.RestartsKey: "0"}},
		Spec: corev1.PodSpec{
			ServiceAccountName: "train",
			InitContainers: []corev1.Container{{Name: "inplace-agent", Image: agentImage, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
				Env: []corev1.EnvVar{{Name: protocol.EnvRestartExitCode, Value: "88"}}}},
			Containers: []corev1.Container{{Name: "trainer", Image: workerImage}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "inplace-agent", Image: agentImage, State: state(agentWaiting)}}},
	}
	if agentWaiting == "" {
		// Regular containers start once the agent has.
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "trainer", Image: workerImage, State: state(workerWaiting)}}
	}
	return p
}

// agentPullMessage is the condition's message while agents wait for
// agentImage and a retry can help.
const agentPullMessage = `the agent image "` + agentImage + `" cannot be pulled. The JobSet cannot start, nor end an in-place restart, until every agent runs; ` +
	`the kubelet keeps retrying. Check agent.image in the manager's configuration and the imagePullSecrets of the Pods' service account (a Pod takes them when it is created); ` +
	`a wrong image needs the JobSet recreated`

func TestImagePullFailureCondition(t *testing.T) {
	firstStart := func() *jobset.JobSet { return inPlaceJobSet(0, 0) }
	trueWith := func(reason, message string) *metav1.Condition {
		return &metav1.Condition{Type: string(jobset.JobSetImagePullFailure), Status: metav1.ConditionTrue, Reason: reason, Message: message, LastTransitionTime: at(-60)}
	}
	atEpoch1 := func(p corev1.Pod) corev1.Pod {
		p.Annotations = map[string]string{jobset.EpochKey: "1"}
		return p
	}
	deleting := func(p corev1.Pod) corev1.Pod {
		p.DeletionTimestamp = ptr.To(at(-1))
		return p
	}
	// What only the Event says: it changes while the Pods wait.
	eventOnly := []string{"ErrImagePull", "ImagePullBackOff", "Pod a", "Pods wait", "service account train"}
	cases := map[string]struct {
		// setup
		js     func() *jobset.JobSet
		before *metav1.Condition
		jobs   func(*jobset.JobSet) []batchv1.Job
		pods   []corev1.Pod
		// want: the condition (nil: none; its message compared if set),
		// words its message must hold and must not, the Events as
		// type/reason, and words the Warning's message must hold.
		want           *metav1.Condition
		wantWords      []string
		wantNotWords   []string
		wantEvents     []string
		wantEventWords []string
	}{
		"every agent runs: no condition": {
			js:   firstStart,
			pods: []corev1.Pod{agentPod("a", "driver", "", ""), agentPod("b", "driver", "", "")},
		},
		"agents that cannot pull their image on a first start: True, the image and what to check; the Pods and the kubelet's words in the Event": {
			js: firstStart,
			pods: []corev1.Pod{agentPod("b", "driver", "ErrImagePull", ""), agentPod("a", "driver", "ImagePullBackOff", ""),
				agentPod("c", "workers", "", ""), agentPod("d", "workers", "", "")},
			want:         &metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonAgentImagePullFailed, Message: agentPullMessage},
			wantNotWords: eventOnly,
			wantEvents:   []string{"Warning/" + ReasonAgentImagePullFailed},
			wantEventWords: []string{`the agent image "` + agentImage + `" cannot be pulled: 2 Pods wait for it (a, b)`,
				"Pod a: ImagePullBackOff: ImagePullBackOff on a", "service account train", "the kubelet keeps retrying", "agent.image in the manager's configuration"},
		},
		"already True for the agent: the same message, no second Event": {
			js: firstStart, before: trueWith(ReasonAgentImagePullFailed, agentPullMessage),
			pods: []corev1.Pod{agentPod("a", "driver", "ErrImagePull", ""), agentPod("b", "driver", "", "")},
			want: &metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonAgentImagePullFailed, Message: agentPullMessage},
		},
		"True with another message (an older manager's): rewritten, said once": {
			js: firstStart, before: trueWith(ReasonAgentImagePullFailed, "before"),
			pods:           []corev1.Pod{agentPod("a", "driver", "ErrImagePull", "")},
			want:           &metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonAgentImagePullFailed, Message: agentPullMessage},
			wantEvents:     []string{"Warning/" + ReasonAgentImagePullFailed},
			wantEventWords: []string{"1 Pod waits for it (a)", "Pod a: ErrImagePull: ErrImagePull on a"},
		},
		"a worker that cannot pull its image after the sync: True for the worker's image, no restart": {
			js: func() *jobset.JobSet { return inPlaceJobSet(0, 1) },
			pods: []corev1.Pod{atEpoch1(agentPod("a", "driver", "", "ImagePullBackOff")), atEpoch1(agentPod("b", "driver", "", "")),
				atEpoch1(agentPod("c", "workers", "", "")), atEpoch1(agentPod("d", "workers", "", ""))},
			want: &metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonWorkerImagePullFailed},
			wantWords: []string{`the image "` + workerImage + `" of container trainer cannot be pulled. The workers of the Pods that wait for it cannot start`,
				"the image in the JobSet's Pod template", "the kubelet keeps retrying"},
			wantNotWords:   eventOnly,
			wantEvents:     []string{"Warning/" + ReasonWorkerImagePullFailed},
			wantEventWords: []string{"1 Pod waits for it (a)", "Pod a: ImagePullBackOff: ImagePullBackOff on a", "service account train"},
		},
		"an agent and a worker wait: the agent is named, the worker counted": {
			js:             firstStart,
			pods:           []corev1.Pod{agentPod("a", "driver", "", "ErrImagePull"), agentPod("b", "driver", "ErrImagePull", "")},
			want:           &metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonAgentImagePullFailed, Message: agentPullMessage},
			wantEvents:     []string{"Warning/" + ReasonAgentImagePullFailed},
			wantEventWords: []string{"1 Pod waits for it (b)", "1 more for other images"},
		},
		"from the worker's image to the agent's: a new reason, a new Event": {
			js: firstStart, before: trueWith(ReasonWorkerImagePullFailed, "before"),
			pods:       []corev1.Pod{agentPod("a", "driver", "ErrImagePull", "")},
			want:       &metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonAgentImagePullFailed, Message: agentPullMessage},
			wantEvents: []string{"Warning/" + ReasonAgentImagePullFailed},
		},
		"imagePullPolicy Never and no image on the node: not a retry that helps": {
			js:             firstStart,
			pods:           []corev1.Pod{agentPod("a", "driver", "ErrImageNeverPull", "")},
			want:           &metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonAgentImagePullFailed},
			wantWords:      []string{"imagePullPolicy is Never, so no retry pulls it", "Load it onto the nodes"},
			wantNotWords:   []string{"keeps retrying"},
			wantEvents:     []string{"Warning/" + ReasonAgentImagePullFailed},
			wantEventWords: []string{"Pod a: ErrImageNeverPull"},
		},
		"an image name that does not parse: no retry cures it": {
			js:             firstStart,
			pods:           []corev1.Pod{agentPod("a", "driver", "InvalidImageName", "")},
			want:           &metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonAgentImagePullFailed},
			wantWords:      []string{"no retry cures: fix agent.image"},
			wantNotWords:   []string{"keeps retrying"},
			wantEvents:     []string{"Warning/" + ReasonAgentImagePullFailed},
			wantEventWords: []string{"Pod a: InvalidImageName"},
		},
		"more Pods than are named: the rest counted": {
			js: firstStart,
			pods: []corev1.Pod{agentPod("e", "workers", "ErrImagePull", ""), agentPod("d", "workers", "ErrImagePull", ""),
				agentPod("c", "driver", "ImagePullBackOff", ""), agentPod("b", "driver", "ErrImagePull", ""), agentPod("a", "driver", "ErrImagePull", "")},
			want:           &metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonAgentImagePullFailed, Message: agentPullMessage},
			wantEvents:     []string{"Warning/" + ReasonAgentImagePullFailed},
			wantEventWords: []string{"5 Pods wait for it (a, b, c and 2 more)"},
		},
		"the agents run again: False, resolved": {
			js: firstStart, before: trueWith(ReasonAgentImagePullFailed, agentPullMessage),
			pods:       []corev1.Pod{agentPod("a", "driver", "", ""), agentPod("b", "driver", "", "")},
			want:       &metav1.Condition{Status: metav1.ConditionFalse, Reason: ReasonImagePullResolved},
			wantEvents: []string{"Normal/" + ReasonImagePullResolved},
		},
		"the waiting Pod is being deleted: resolved, it will not start": {
			js: firstStart, before: trueWith(ReasonAgentImagePullFailed, agentPullMessage),
			pods:       []corev1.Pod{deleting(agentPod("a", "driver", "ImagePullBackOff", ""))},
			want:       &metav1.Condition{Status: metav1.ConditionFalse, Reason: ReasonImagePullResolved},
			wantEvents: []string{"Normal/" + ReasonImagePullResolved},
		},
		"a JobSet that fails meanwhile: closed as finished": {
			js: func() *jobset.JobSet {
				js := firstStart()
				js.Spec.FailurePolicy.MaxRestarts = 0
				return js
			},
			before: trueWith(ReasonAgentImagePullFailed, agentPullMessage),
			jobs: func(js *jobset.JobSet) []batchv1.Job {
				return jobList(failedJob(jobOf(js, "driver", 0), batchv1.JobReasonBackoffLimitExceeded, "", at(0)))
			},
			pods:       []corev1.Pod{agentPod("a", "driver", "ImagePullBackOff", "")},
			want:       &metav1.Condition{Status: metav1.ConditionFalse, Reason: ReasonJobSetFinished},
			wantEvents: []string{"Warning/" + ReasonReachedMaxRestarts},
		},
		"without InPlaceRestart: no agents, no condition": {
			js:   func() *jobset.JobSet { return testJobSet("driver", 1) },
			pods: []corev1.Pod{agentPod("a", "driver", "", "ErrImagePull")},
		},
		"in-place restarts disabled: no condition": {
			js: func() *jobset.JobSet {
				js := firstStart()
				js.Annotations = map[string]string{jobset.DisableInPlaceRestartKey: "true"}
				return js
			},
			pods: []corev1.Pod{agentPod("a", "driver", "", "ErrImagePull")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			js := tc.js()
			if tc.before != nil {
				js.Status.Conditions = append(js.Status.Conditions, *tc.before)
			}
			var jobs []batchv1.Job
			if tc.jobs != nil {
				jobs = tc.jobs(js)
			}
			p := decidePure(t, js, Observed{Jobs: jobs, Pods: tc.pods, ServiceExists: true}, at(0), time.Minute)

			got := findCondition(&p.Status, jobset.JobSetImagePullFailure)
			switch {
			case tc.want == nil && got != nil:
				t.Fatalf("condition %+v, want none", got)
			case tc.want != nil && got == nil:
				t.Fatalf("no condition, want %s %s", tc.want.Status, tc.want.Reason)
			case tc.want != nil:
				if got.Status != tc.want.Status || got.Reason != tc.want.Reason {
					t.Errorf("condition %s %s, want %s %s (message %q)", got.Status, got.Reason, tc.want.Status, tc.want.Reason, got.Message)
				}
				if tc.want.Message != "" && got.Message != tc.want.Message {
					t.Errorf("message\n%q, want\n%q", got.Message, tc.want.Message)
				}
				for _, w := range tc.wantWords {
					if !strings.Contains(got.Message, w) {
						t.Errorf("message %q does not say %q", got.Message, w)
					}
				}
				for _, w := range tc.wantNotWords {
					if strings.Contains(got.Message, w) {
						t.Errorf("message %q says %q, which changes while the Pods wait", got.Message, w)
					}
				}
				if tc.before != nil && tc.before.Status == got.Status && !got.LastTransitionTime.Equal(&tc.before.LastTransitionTime) {
					t.Errorf("lastTransitionTime moved to %v without a transition", got.LastTransitionTime)
				}
			}
			var events []string
			for _, e := range p.Events {
				events = append(events, e.Type+"/"+e.Reason)
				if e.Type != corev1.EventTypeWarning || e.Reason == ReasonReachedMaxRestarts {
					continue
				}
				for _, w := range tc.wantEventWords {
					if !strings.Contains(e.Message, w) {
						t.Errorf("Event %q does not say %q", e.Message, w)
					}
				}
			}
			if diff := cmp.Diff(tc.wantEvents, events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// The kubelet flips between ErrImagePull and ImagePullBackOff at every
// back-off, with new words each time, and Pods join the wait: none of it
// is a status write, nor a second Event.
func TestImagePullFailureIsWrittenOncePerTransition(t *testing.T) {
	js := inPlaceJobSet(0, 0)
	waits := [][]corev1.Pod{
		{agentPod("a", "driver", "ErrImagePull", ""), agentPod("b", "driver", "", "")},
		{agentPod("a", "driver", "ImagePullBackOff", ""), agentPod("b", "driver", "", "")},
		{agentPod("a", "driver", "ErrImagePull", ""), agentPod("b", "driver", "ImagePullBackOff", "")},
		{agentPod("a", "driver", "ImagePullBackOff", ""), agentPod("b", "driver", "ErrImagePull", "")},
	}
	var warnings int
	for i, pods := range waits {
		p := decidePure(t, js, Observed{Pods: pods, ServiceExists: true}, at(i), time.Minute)
		for _, e := range p.Events {
			if e.Reason == ReasonAgentImagePullFailed {
				warnings++
			}
		}
		if i > 0 && NeedsWrite(js, js.Status, p.Status) {
			t.Errorf("step %d: a status write for the kubelet's back-off:\n%s", i, cmp.Diff(js.Status, p.Status))
		}
		js.Status = p.Status
	}
	if warnings != 1 {
		t.Errorf("%d Warnings, want 1", warnings)
	}
}

// What the Pod and the kubelet say is quoted within bounds: a condition's
// message too long fails the whole status write, an Event's its write.
func TestImagePullFailureMessagesAreBounded(t *testing.T) {
	long := strings.Repeat("é", 40000)
	pod := agentPod("a", "driver", "ErrImagePull", "")
	pod.Status.InitContainerStatuses[0].Image = "registry.example/" + long
	pod.Status.InitContainerStatuses[0].State.Waiting.Message = "rpc error: " + long
	p := decidePure(t, inPlaceJobSet(0, 0), Observed{Pods: []corev1.Pod{pod}, ServiceExists: true}, at(0), time.Minute)
	c := findCondition(&p.Status, jobset.JobSetImagePullFailure)
	if c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("condition %+v, want True", c)
	}
	if len(c.Message) > maxConditionMessage || !utf8.ValidString(c.Message) {
		t.Errorf("condition message of %d bytes (valid UTF-8: %v), want at most %d", len(c.Message), utf8.ValidString(c.Message), maxConditionMessage)
	}
	if !strings.Contains(c.Message, "the kubelet keeps retrying") {
		t.Errorf("condition message %q lost what to do", c.Message)
	}
	if len(p.Events) != 1 {
		t.Fatalf("events %+v, want one", p.Events)
	}
	e := p.Events[0].Message
	if len(e) > maxEventMessage || !utf8.ValidString(e) {
		t.Errorf("Event message of %d bytes (valid UTF-8: %v), want at most %d", len(e), utf8.ValidString(e), maxEventMessage)
	}
	for _, w := range []string{"Pod a: ErrImagePull: rpc error: ", "the kubelet keeps retrying"} {
		if !strings.Contains(e, w) {
			t.Errorf("Event %q does not say %q", e, w)
		}
	}
}

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"0123456789", 10, "0123456789"},
		{"0123456789a", 10, "0123456..."},
		{"ééééé", 8, "éé..."}, // not within a rune
		{"abc", 2, ""},
	} {
		if got := clip(tc.s, tc.n); got != tc.want {
			t.Errorf("clip(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

func TestSmallestKeepsTheFirstNamesInOrder(t *testing.T) {
	kept := smallest(nil, map[string]struct{}{"d": {}, "b": {}}, 3)
	kept = smallest(kept, map[string]struct{}{"e": {}, "a": {}, "c": {}}, 3)
	if diff := cmp.Diff([]string{"a", "b", "c"}, kept); diff != "" {
		t.Errorf("smallest (-want +got):\n%s", diff)
	}
}
