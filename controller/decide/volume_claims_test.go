package decide

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

func claimTemplateOf(name string) corev1.PersistentVolumeClaim {
	return corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"tier": "data"}, Annotations: map[string]string{"note": name}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

// withClaims gives js a Delete policy with a template "data" and a Retain
// policy with a template "ckpt".
func withClaims(js *jobset.JobSet) *jobset.JobSet {
	js.Spec.VolumeClaimPolicies = []jobset.VolumeClaimPolicy{
		{Templates: []corev1.PersistentVolumeClaim{claimTemplateOf("data")}},
		{
			Templates:       []corev1.PersistentVolumeClaim{claimTemplateOf("ckpt")},
			RetentionPolicy: &jobset.VolumeRetentionPolicy{WhenDeleted: ptr.To(jobset.RetentionPolicyRetain)},
		},
	}
	jobset.Default(js)
	return js
}

func TestDecideCreatesMissingClaims(t *testing.T) {
	owner := []metav1.OwnerReference{{
		APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "js", UID: "uid-1",
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
	claim := func(name string, owners []metav1.OwnerReference) *corev1.PersistentVolumeClaim {
		t := claimTemplateOf(name)
		return &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{
				Name: name + "-js", Namespace: "ns",
				Labels:          map[string]string{"tier": "data", jobset.JobSetNameKey: "js"},
				Annotations:     map[string]string{"note": name},
				OwnerReferences: owners,
			},
			Spec: t.Spec,
		}
	}
	cases := map[string]struct {
		suspend  bool
		existing map[string]bool
		want     []*corev1.PersistentVolumeClaim
	}{
		"none exists: both, only the Delete one owned": {
			want: []*corev1.PersistentVolumeClaim{claim("data", owner), claim("ckpt", nil)},
		},
		"suspended: created all the same": {
			suspend: true,
			want:    []*corev1.PersistentVolumeClaim{claim("data", owner), claim("ckpt", nil)},
		},
		"one exists": {
			existing: map[string]bool{"data-js": true},
			want:     []*corev1.PersistentVolumeClaim{claim("ckpt", nil)},
		},
		"both exist: nothing to send": {
			existing: map[string]bool{"data-js": true, "ckpt-js": true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			js := withClaims(testJobSet("workers", 1))
			js.Spec.Suspend = ptr.To(tc.suspend)
			p := decidePure(t, js, Observed{ServiceExists: true, Claims: tc.existing}, at(0), time.Minute)
			if diff := cmp.Diff(tc.want, p.CreatePVCs); diff != "" {
				t.Errorf("claims to create (-want +got):\n%s", diff)
			}
			if len(p.CreateJobs) != 1 {
				t.Errorf("jobs to create: %v", names(p.CreateJobs))
			}
		})
	}
}

func TestDecideCreatesNoClaimsOnceFinished(t *testing.T) {
	js := withClaims(testJobSet("workers", 1))
	js.Status.TerminalState = jobset.TerminalStateCompleted
	js.Status.Conditions = []metav1.Condition{{Type: string(jobset.JobSetCompleted), Status: metav1.ConditionTrue}}
	p := decidePure(t, js, Observed{}, at(0), time.Minute)
	if len(p.CreatePVCs) != 0 {
		t.Errorf("a finished JobSet gets claims: %v", p.CreatePVCs)
	}
}

func TestBuildJobMountsClaimsWhereMounted(t *testing.T) {
	js := withClaims(testJobSet("workers", 1, "init", 1, "other", 1))
	// workers mounts data in a container, init mounts ckpt in an init
	// container, other mounts neither; a Pod volume of the claim's name
	// already there is kept.
	js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	initPod := &js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec
	initPod.InitContainers = []corev1.Container{{Name: "fetch", VolumeMounts: []corev1.VolumeMount{{Name: "ckpt", MountPath: "/ckpt"}}}}
	js.Spec.ReplicatedJobs[2].Template.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/tmp"}}
	js.Spec.ReplicatedJobs[2].Template.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	before := js.DeepCopy()

	claimVolume := func(name string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name + "-js"}}}
	}
	want := map[string][]corev1.Volume{
		"workers": {claimVolume("data")},
		"init":    {claimVolume("ckpt")},
		"other":   {{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}
	for i, rj := range js.Spec.ReplicatedJobs {
		job := buildJob(js, i, 0, false, nil)
		if diff := cmp.Diff(want[rj.Name], job.Spec.Template.Spec.Volumes); diff != "" {
			t.Errorf("%s: Pod volumes (-want +got):\n%s", rj.Name, diff)
		}
	}
	if diff := cmp.Diff(before, js); diff != "" {
		t.Errorf("buildJob changed the JobSet's templates (-before +after):\n%s", diff)
	}

	// A volume of the claim's name in the Pod template is not doubled.
	js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	if got := buildJob(js, 0, 0, false, nil).Spec.Template.Spec.Volumes; len(got) != 1 || got[0].EmptyDir == nil {
		t.Errorf("Pod volumes %+v, want the template's own", got)
	}
}
