package webhook

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/policies"
)

func claimSpec(size string, modes ...corev1.PersistentVolumeAccessMode) corev1.PersistentVolumeClaimSpec {
	return corev1.PersistentVolumeClaimSpec{
		AccessModes: modes,
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
	}
}

// claimJobSet is JobSet js with one claim template "data" of spec and the
// retention policy when.
func claimJobSet(spec corev1.PersistentVolumeClaimSpec, when jobset.RetentionPolicyType) *jobset.JobSet {
	return &jobset.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "js", Namespace: "ns"},
		Spec: jobset.JobSetSpec{VolumeClaimPolicies: []jobset.VolumeClaimPolicy{{
			Templates:       []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: spec}},
			RetentionPolicy: &jobset.VolumeRetentionPolicy{WhenDeleted: ptr.To(when)},
		}}},
	}
}

// existing is the claim data-js as the API server holds it: the template's
// fields plus what the server and the binding filled in.
func existing(spec corev1.PersistentVolumeClaimSpec) *corev1.PersistentVolumeClaim {
	spec.StorageClassName = ptr.To("standard")
	spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
	spec.VolumeName = "pv-1"
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-js", Namespace: "ns"}, Spec: spec}
}

func TestExistingClaims(t *testing.T) {
	rwx := claimSpec("1Gi", corev1.ReadWriteMany)
	cases := map[string]struct {
		claims  []client.Object
		js      *jobset.JobSet
		want    []string
		wantErr bool
	}{
		"no claim exists": {
			js: claimJobSet(rwx, jobset.RetentionPolicyDelete),
		},
		"a matching claim, retained: server-filled fields ignored": {
			claims: []client.Object{existing(claimSpec("1024Mi", corev1.ReadWriteMany))},
			js:     claimJobSet(rwx, jobset.RetentionPolicyRetain),
		},
		"a matching claim, deleted with the JobSet": {
			claims: []client.Object{existing(rwx)},
			js:     claimJobSet(rwx, jobset.RetentionPolicyDelete),
			want:   []string{`spec.volumeClaimPolicies[0].retentionPolicy.whenDeleted: the PersistentVolumeClaim "data-js" of spec.volumeClaimPolicies[0].templates[0] exists already and would be deleted with the JobSet: set whenDeleted to Retain to use it, or delete the claim`},
		},
		"other access modes and size": {
			claims: []client.Object{existing(claimSpec("2Gi", corev1.ReadWriteOnce))},
			js:     claimJobSet(rwx, jobset.RetentionPolicyRetain),
			want: []string{
				`spec.volumeClaimPolicies[0].templates[0].spec.accessModes: the PersistentVolumeClaim "data-js" exists, and its spec.accessModes is not the template's ["ReadWriteMany"]: make the template match the claim (kubectl get pvc data-js -o yaml), or delete the claim`,
				`spec.volumeClaimPolicies[0].templates[0].spec.resources: the PersistentVolumeClaim "data-js" exists, and its spec.resources is not the template's {"requests":{"storage":"1Gi"}}: make the template match the claim (kubectl get pvc data-js -o yaml), or delete the claim`,
			},
		},
		"another storage class the template names": {
			claims: []client.Object{existing(rwx)},
			js: func() *jobset.JobSet {
				spec := rwx
				spec.StorageClassName = ptr.To("fast")
				return claimJobSet(spec, jobset.RetentionPolicyRetain)
			}(),
			want: []string{`spec.volumeClaimPolicies[0].templates[0].spec.storageClassName: the PersistentVolumeClaim "data-js" exists, and its spec.storageClassName is not the template's "fast": make the template match the claim (kubectl get pvc data-js -o yaml), or delete the claim`},
		},
		"a selector the claim lacks": {
			claims: []client.Object{existing(rwx)},
			js: func() *jobset.JobSet {
				spec := rwx
				spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"disk": "ssd"}}
				return claimJobSet(spec, jobset.RetentionPolicyRetain)
			}(),
			want: []string{`spec.volumeClaimPolicies[0].templates[0].spec.selector: the PersistentVolumeClaim "data-js" exists, and its spec.selector is not the template's {"matchLabels":{"disk":"ssd"}}: make the template match the claim (kubectl get pvc data-js -o yaml), or delete the claim`},
		},
		"a generated name: nothing to read": {
			claims: []client.Object{existing(rwx)},
			js: func() *jobset.JobSet {
				js := claimJobSet(rwx, jobset.RetentionPolicyDelete)
				js.Name, js.GenerateName = "", "js-"
				return js
			}(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := fake.NewClientBuilder().WithObjects(tc.claims...).Build()
			got, err := existingClaims(context.Background(), r, "ns", tc.js)
			if err != nil {
				t.Fatal(err)
			}
			var msgs []string
			for _, v := range got {
				if v.Policy != claimsPolicy {
					t.Errorf("policy %q", v.Policy)
				}
				msgs = append(msgs, v.Message)
			}
			if diff := cmp.Diff(tc.want, msgs); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
		})
	}
}

// The validating webhook refuses a create that an existing claim
// contradicts, and leaves updates alone: the claims are the JobSet's by
// then.
func TestValidatorChecksExistingClaimsOnCreate(t *testing.T) {
	engine, err := policies.NewEngine(nil)
	if err != nil {
		t.Fatal(err)
	}
	js := claimJobSet(claimSpec("1Gi", corev1.ReadWriteMany), jobset.RetentionPolicyDelete)
	js.Spec.ReplicatedJobs = []jobset.ReplicatedJob{{Name: "w", Replicas: 1}}
	pod := &js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
	pod.RestartPolicy = corev1.RestartPolicyNever
	pod.Containers = []corev1.Container{{Name: "c", Image: "i", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}}
	raw, err := json.Marshal(js)
	if err != nil {
		t.Fatal(err)
	}
	v := NewValidator(Options{Engine: engine, APIReader: fake.NewClientBuilder().WithObjects(existing(claimSpec("1Gi", corev1.ReadWriteMany))).Build()})

	resp := v.Handle(context.Background(), request(raw))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "volume_claims: spec.volumeClaimPolicies[0].retentionPolicy.whenDeleted") {
		t.Errorf("create: allowed %v, %v", resp.Allowed, resp.Result)
	}
	update := request(raw)
	update.Operation = admissionv1.Update
	update.OldObject = update.Object
	if resp := v.Handle(context.Background(), update); !resp.Allowed {
		t.Errorf("update refused: %v", resp.Result)
	}
}
