package decide

import (
	"strings"
	"testing"
	"time"

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

func TestImagePullFailureCondition(t *testing.T) {
	firstStart := func() *jobset.JobSet { return inPlaceJobSet(0, 0) }
	trueWith := func(reason string) *metav1.Condition {
		return &metav1.Condition{Type: string(jobset.JobSetImagePullFailure), Status: metav1.ConditionTrue, Reason: reason, Message: "before", LastTransitionTime: at(-60)}
	}
	atEpoch1 := func(p corev1.Pod) corev1.Pod {
		p.Annotations = map[string]string{jobset.EpochKey: "1"}
		return p
	}
	deleting := func(p corev1.Pod) corev1.Pod {
		p.DeletionTimestamp = ptr.To(at(-1))
		return p
	}
	cases := map[string]struct {
		// setup
		js     func() *jobset.JobSet
		before *metav1.Condition
		jobs   func(*jobset.JobSet) []batchv1.Job
		pods   []corev1.Pod
		// want: the condition (nil: none), words its message must hold,
		// and the Events as type/reason.
		want       *metav1.Condition
		wantWords  []string
		wantEvents []string
	}{
		"every agent runs: no condition": {
			js:   firstStart,
			pods: []corev1.Pod{agentPod("a", "driver", "", ""), agentPod("b", "driver", "", "")},
		},
		"agents that cannot pull their image on a first start: True, named, with the kubelet's words and what to check": {
			js: firstStart,
			pods: []corev1.Pod{agentPod("b", "driver", "ErrImagePull", ""), agentPod("a", "driver", "ImagePullBackOff", ""),
				agentPod("c", "workers", "", ""), agentPod("d", "workers", "", "")},
			want: &metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonAgentImagePullFailed},
			wantWords: []string{`the agent image "` + agentImage + `" cannot be pulled: 2 Pods wait for it (a, b)`,
				"Pod a: ImagePullBackOff: ImagePullBackOff on a", "the kubelet keeps retrying", "agent.image in the manager's configuration", "service account train", "recreated"},
			wantEvents: []string{"Warning/" + ReasonAgentImagePullFailed},
		},
		"already True for the agent: the message follows, no second Event": {
			js: firstStart, before: trueWith(ReasonAgentImagePullFailed),
			pods:      []corev1.Pod{agentPod("a", "driver", "ErrImagePull", ""), agentPod("b", "driver", "", "")},
			want:      &metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonAgentImagePullFailed},
			wantWords: []string{"1 Pod waits for it (a)", "Pod a: ErrImagePull: ErrImagePull on a"},
		},
		"a worker that cannot pull its image after the sync: True for the worker's image, no restart": {
			js: func() *jobset.JobSet { return inPlaceJobSet(0, 1) },
			pods: []corev1.Pod{atEpoch1(agentPod("a", "driver", "", "ImagePullBackOff")), atEpoch1(agentPod("b", "driver", "", "")),
				atEpoch1(agentPod("c", "workers", "", "")), atEpoch1(agentPod("d", "workers", "", ""))},
			want: &metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonWorkerImagePullFailed},
			wantWords: []string{`the image "` + workerImage + `" of container trainer cannot be pulled: 1 Pod waits for it (a)`,
				"The workers of those Pods cannot start", "the image in the JobSet's Pod template", "service account train"},
			wantEvents: []string{"Warning/" + ReasonWorkerImagePullFailed},
		},
		"an agent and a worker wait: the agent is named, the worker counted": {
			js:         firstStart,
			pods:       []corev1.Pod{agentPod("a", "driver", "", "ErrImagePull"), agentPod("b", "driver", "ErrImagePull", "")},
			want:       &metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonAgentImagePullFailed},
			wantWords:  []string{"1 Pod waits for it (b)", "1 more for other images"},
			wantEvents: []string{"Warning/" + ReasonAgentImagePullFailed},
		},
		"from the worker's image to the agent's: a new reason, a new Event": {
			js: firstStart, before: trueWith(ReasonWorkerImagePullFailed),
			pods:       []corev1.Pod{agentPod("a", "driver", "ErrImagePull", "")},
			want:       &metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonAgentImagePullFailed},
			wantEvents: []string{"Warning/" + ReasonAgentImagePullFailed},
		},
		"imagePullPolicy Never and no image on the node: not a retry that helps": {
			js:         firstStart,
			pods:       []corev1.Pod{agentPod("a", "driver", "ErrImageNeverPull", "")},
			want:       &metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonAgentImagePullFailed},
			wantWords:  []string{"ErrImageNeverPull", "imagePullPolicy Never", "load it onto the nodes"},
			wantEvents: []string{"Warning/" + ReasonAgentImagePullFailed},
		},
		"an image name that does not parse: no retry cures it": {
			js:         firstStart,
			pods:       []corev1.Pod{agentPod("a", "driver", "InvalidImageName", "")},
			want:       &metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonAgentImagePullFailed},
			wantWords:  []string{"InvalidImageName", "no retry cures: fix agent.image"},
			wantEvents: []string{"Warning/" + ReasonAgentImagePullFailed},
		},
		"more Pods than are named: the rest counted": {
			js: firstStart,
			pods: []corev1.Pod{agentPod("e", "workers", "ErrImagePull", ""), agentPod("d", "workers", "ErrImagePull", ""),
				agentPod("c", "driver", "ImagePullBackOff", ""), agentPod("b", "driver", "ErrImagePull", ""), agentPod("a", "driver", "ErrImagePull", "")},
			want:       &metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonAgentImagePullFailed},
			wantWords:  []string{"5 Pods wait for it (a, b, c and 2 more)"},
			wantEvents: []string{"Warning/" + ReasonAgentImagePullFailed},
		},
		"the agents run again: False, resolved": {
			js: firstStart, before: trueWith(ReasonAgentImagePullFailed),
			pods:       []corev1.Pod{agentPod("a", "driver", "", ""), agentPod("b", "driver", "", "")},
			want:       &metav1.Condition{Status: metav1.ConditionFalse, Reason: ReasonImagePullResolved},
			wantEvents: []string{"Normal/" + ReasonImagePullResolved},
		},
		"the waiting Pod is being deleted: resolved, it will not start": {
			js: firstStart, before: trueWith(ReasonAgentImagePullFailed),
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
			before: trueWith(ReasonAgentImagePullFailed),
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
				for _, w := range tc.wantWords {
					if !strings.Contains(got.Message, w) {
						t.Errorf("message %q does not say %q", got.Message, w)
					}
				}
				if tc.before != nil && tc.before.Status == got.Status && !got.LastTransitionTime.Equal(&tc.before.LastTransitionTime) {
					t.Errorf("lastTransitionTime moved to %v without a transition", got.LastTransitionTime)
				}
			}
			var events []string
			for _, e := range p.Events {
				events = append(events, e.Type+"/"+e.Reason)
			}
			if diff := cmp.Diff(tc.wantEvents, events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSmallestKeepsTheFirstNamesInOrder(t *testing.T) {
	kept := smallest(nil, map[string]struct{}{"d": {}, "b": {}}, 3)
	kept = smallest(kept, map[string]struct{}{"e": {}, "a": {}, "c": {}}, 3)
	if diff := cmp.Diff([]string{"a", "b", "c"}, kept); diff != "" {
		t.Errorf("smallest (-want +got):\n%s", diff)
	}
}
