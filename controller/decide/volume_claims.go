package decide

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// ClaimName is the name of the PersistentVolumeClaim made from the claim
// template named template of spec.volumeClaimPolicies: one claim per
// template, shared by every Pod of the JobSet.
func ClaimName(template, jobSetName string) string {
	return template + "-" + jobSetName
}

// ClaimTemplates returns the JobSet's claim templates in spec order, each
// with whether its claim goes with the JobSet (whenDeleted Delete, the
// default) or outlives it (Retain).
func ClaimTemplates(js *jobset.JobSet) []ClaimTemplate {
	var out []ClaimTemplate
	for i := range js.Spec.VolumeClaimPolicies {
		p := &js.Spec.VolumeClaimPolicies[i]
		deleted := p.RetentionPolicy == nil || ptr.Deref(p.RetentionPolicy.WhenDeleted, jobset.RetentionPolicyDelete) == jobset.RetentionPolicyDelete
		for j := range p.Templates {
			out = append(out, ClaimTemplate{Template: &p.Templates[j], deleteWithJobSet: deleted})
		}
	}
	return out
}

// ClaimTemplate is a claim template of spec.volumeClaimPolicies and
// whether its claim is deleted with the JobSet.
type ClaimTemplate struct {
	Template         *corev1.PersistentVolumeClaim
	deleteWithJobSet bool
}

// missingClaims returns the claims of the JobSet whose names existing does
// not hold, in spec order.
func missingClaims(js *jobset.JobSet, existing map[string]bool) []*corev1.PersistentVolumeClaim {
	var out []*corev1.PersistentVolumeClaim
	for _, t := range ClaimTemplates(js) {
		if !existing[ClaimName(t.Template.Name, js.Name)] {
			out = append(out, buildClaim(js, t))
		}
	}
	return out
}

// buildClaim returns the claim of a template: the template's labels (plus
// the jobset-name label, by which the manager's cache selects claims),
// annotations and spec. Only a claim deleted with the JobSet has the JobSet
// as its controller; a retained one has no owner, so that the garbage
// collector leaves it when the JobSet goes.
func buildClaim(js *jobset.JobSet, t ClaimTemplate) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:        ClaimName(t.Template.Name, js.Name),
			Namespace:   js.Namespace,
			Labels:      merged(t.Template.Labels, map[string]string{jobset.JobSetNameKey: js.Name}),
			Annotations: merged(t.Template.Annotations, nil),
		},
		Spec: *t.Template.Spec.DeepCopy(),
	}
	if len(pvc.Annotations) == 0 {
		pvc.Annotations = nil
	}
	if t.deleteWithJobSet {
		pvc.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(js, jobset.GroupVersion.WithKind(jobset.Kind))}
	}
	return pvc
}

// addClaimVolumes gives a Pod spec a volume for every claim template that
// one of its containers or init containers mounts by the template's name,
// backed by the JobSet's claim. A Pod volume of that name already there
// (admission refuses one) is left as it is.
func addClaimVolumes(js *jobset.JobSet, pod *corev1.PodSpec) {
	for _, t := range ClaimTemplates(js) {
		name := t.Template.Name
		if !mounts(pod, name) || slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == name }) {
			continue
		}
		pod.Volumes = append(pod.Volumes, corev1.Volume{
			Name: name,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
				ClaimName: ClaimName(name, js.Name),
			}},
		})
	}
}

// mounts reports whether a container or init container of pod mounts the
// volume named name.
func mounts(pod *corev1.PodSpec, name string) bool {
	for _, cs := range [][]corev1.Container{pod.InitContainers, pod.Containers} {
		for i := range cs {
			if slices.ContainsFunc(cs[i].VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == name }) {
				return true
			}
		}
	}
	return false
}
