package inject

import (
	"path"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
)

// The supervisor's in-process flags come from the JobSet's annotations,
// held to the policy's bounds should the policy be off.
func TestInProcessFlags(t *testing.T) {
	inProcess := func(extra map[string]string) map[string]string {
		a := map[string]string{protocol.RestartScopeAnnotation: protocol.RestartScopeInProcess}
		for k, v := range extra {
			a[k] = v
		}
		return a
	}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		park        time.Duration
		standby     bool
	}{
		{"container scope", map[string]string{}, 0, false},
		{"process scope, annotated", map[string]string{protocol.RestartScopeAnnotation: protocol.RestartScopeProcess,
			protocol.ParkDeadlineAnnotation: "20s", protocol.StandbyAnnotation: "true"}, 0, false},
		{"in-process, defaults", inProcess(nil), protocol.DefaultParkDeadline, false},
		{"in-process, set", inProcess(map[string]string{protocol.ParkDeadlineAnnotation: "20s", protocol.StandbyAnnotation: "true"}), 20 * time.Second, true},
		{"in-process, below the bounds", inProcess(map[string]string{protocol.ParkDeadlineAnnotation: "500ms"}), time.Second, false},
		{"in-process, above the bounds", inProcess(map[string]string{protocol.ParkDeadlineAnnotation: "1h"}), 10 * time.Minute, false},
		{"in-process, unreadable", inProcess(map[string]string{protocol.ParkDeadlineAnnotation: "soon", protocol.StandbyAnnotation: "yes"}), protocol.DefaultParkDeadline, false},
	} {
		if got := parkDeadline(tc.annotations); got != tc.park {
			t.Errorf("%s: parkDeadline = %s, want %s", tc.name, got, tc.park)
		}
		if got := standbyOn(tc.annotations); got != tc.standby {
			t.Errorf("%s: standbyOn = %v, want %v", tc.name, got, tc.standby)
		}
	}
}

// With agent.supervisorVolume Image the workers run the supervisor from an
// image volume of the agent's image: no emptyDir, no copy, no postStart
// hook. A template injected before keeps the volume it was injected with.
func TestSupervisorFromAnImageVolume(t *testing.T) {
	image := defaultAgent()
	image.SupervisorVolume = configv1alpha1.SupervisorVolumeImage
	js := load(t, "testdata/process-scope.yaml")
	mutate(js, image)
	pod := js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
	i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == supervisorVolume })
	if i < 0 || pod.Volumes[i].Image == nil || pod.Volumes[i].EmptyDir != nil || pod.Volumes[i].Image.Reference != image.Image {
		t.Fatalf("volumes %+v: want %s as an image volume of %s", pod.Volumes, supervisorVolume, image.Image)
	}
	want := corev1.VolumeMount{Name: supervisorVolume, MountPath: protocol.SupervisorDir, ReadOnly: true, SubPath: "usr/local/bin"}
	for _, c := range pod.Containers {
		if !slices.Contains(c.VolumeMounts, want) {
			t.Errorf("container %s mounts %+v, want %+v", c.Name, c.VolumeMounts, want)
		}
		if c.Command[0] != protocol.SupervisorBinary || path.Join("/", want.SubPath, path.Base(c.Command[0])) != protocol.ImageSupervisorBinary {
			t.Errorf("container %s runs %s, which is not the image's %s", c.Name, c.Command[0], protocol.ImageSupervisorBinary)
		}
	}
	ag := pod.InitContainers[slices.IndexFunc(pod.InitContainers, func(c corev1.Container) bool { return c.Name == image.ContainerName })]
	if ag.Lifecycle != nil && ag.Lifecycle.PostStart != nil {
		t.Errorf("agent has a postStart hook %+v: nothing to copy", ag.Lifecycle.PostStart)
	}
	if slices.ContainsFunc(ag.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == supervisorVolume }) {
		t.Errorf("agent mounts the supervisor's volume: %+v", ag.VolumeMounts)
	}
	again := js.DeepCopy()
	if d := mutate(again, image); len(d) != 0 {
		t.Errorf("second injection decided %v", d)
	}
	if diff := cmp.Diff(js, again); diff != "" {
		t.Errorf("mutate(mutate(x)) != mutate(x) (-once +twice):\n%s", diff)
	}

	// Injected with the emptyDir, then again under Image: the hook and
	// the emptyDir stay, and the other way round nothing is added.
	copied := load(t, "testdata/process-scope.yaml")
	mutate(copied, defaultAgent())
	again = copied.DeepCopy()
	mutate(again, image)
	if diff := cmp.Diff(copied, again); diff != "" {
		t.Errorf("an emptyDir injection injected again under Image changed (-once +twice):\n%s", diff)
	}
	again = js.DeepCopy()
	mutate(again, defaultAgent())
	if diff := cmp.Diff(js, again); diff != "" {
		t.Errorf("an Image injection injected again under EmptyDir changed (-once +twice):\n%s", diff)
	}
}

// A worker added to a template whose supervisor volume is an emptyDir is
// wrapped for that emptyDir, whatever the configuration says now: an
// image volume's subPath on it would name a directory that is not there.
func TestSupervisorVolumeOfATemplateStays(t *testing.T) {
	image := defaultAgent()
	image.SupervisorVolume = configv1alpha1.SupervisorVolumeImage
	js := load(t, "testdata/process-scope.yaml")
	mutate(js, defaultAgent())
	pod := &js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
	pod.Containers = append(pod.Containers, corev1.Container{Name: "late", Image: "late:v1", Command: []string{"late"}})
	mutate(js, image)
	late := pod.Containers[len(pod.Containers)-1]
	want := corev1.VolumeMount{Name: supervisorVolume, MountPath: protocol.SupervisorDir, ReadOnly: true}
	if late.Command[0] != protocol.SupervisorBinary || !slices.Contains(late.VolumeMounts, want) {
		t.Errorf("late worker runs %v with mounts %+v, want the supervisor from %+v", late.Command, late.VolumeMounts, want)
	}
	for _, v := range pod.Volumes {
		if v.Name == supervisorVolume && v.EmptyDir == nil {
			t.Errorf("the supervisor's volume became %+v", v)
		}
	}
}

// The image volume is the agent container's own image, with its pull
// policy.
func TestSupervisorImageIsTheAgentContainers(t *testing.T) {
	image := defaultAgent()
	image.SupervisorVolume = configv1alpha1.SupervisorVolumeImage
	js := load(t, "testdata/process-scope.yaml")
	jobset.Default(js)
	injectJob(&js.Spec.ReplicatedJobs[0], image, true)
	pod := &js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
	a := slices.IndexFunc(pod.InitContainers, func(c corev1.Container) bool { return c.Name == image.ContainerName })
	pod.InitContainers[a].Image, pod.InitContainers[a].ImagePullPolicy = "registry.example/agent:v9", corev1.PullNever
	Inject(js, image)
	for _, v := range pod.Volumes {
		if v.Name == supervisorVolume && (v.Image == nil || v.Image.Reference != "registry.example/agent:v9" || v.Image.PullPolicy != corev1.PullNever) {
			t.Errorf("supervisor volume %+v, want the agent container's image and pull policy", v)
		}
	}
}
