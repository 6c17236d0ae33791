package webhook

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/policies"
)

// The validating webhook reads the claims a JobSet being created would use.
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get

// claimsPolicy names the violations of existingClaims, as the built-in
// that validates the rest of spec.volumeClaimPolicies.
const claimsPolicy = "volume_claims"

// existingClaims checks, for a JobSet being created in namespace, the
// claims <template>-<jobset> of its volumeClaimPolicies that exist already:
// the controller would not create them but mount them as they are, so each
// must have the template's spec and, not being the JobSet's to delete,
// whenDeleted Retain. A JobSet with only a generateName has no claim name
// yet and is not checked. It is the one admission decision that reads the
// cluster beyond the Namespace, hence Go and not Rego.
func existingClaims(ctx context.Context, r client.Reader, namespace string, js *jobset.JobSet) ([]policies.Violation, error) {
	if js.Name == "" {
		return nil, nil
	}
	var out []policies.Violation
	for i, p := range js.Spec.VolumeClaimPolicies {
		retained := p.RetentionPolicy != nil && ptr.Deref(p.RetentionPolicy.WhenDeleted, jobset.RetentionPolicyDelete) == jobset.RetentionPolicyRetain
		for j := range p.Templates {
			t := &p.Templates[j]
			if t.Name == "" {
				continue // refused by the built-in
			}
			name := t.Name + "-" + js.Name
			var pvc corev1.PersistentVolumeClaim
			err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &pvc)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("reading PersistentVolumeClaim %s: %w", name, err)
			}
			path := fmt.Sprintf("spec.volumeClaimPolicies[%d].templates[%d]", i, j)
			for _, field := range claimSpecDiff(&t.Spec, &pvc.Spec) {
				// The claim's own value is not in the message: the review
				// is the only word the webhook has for who asks, and what a
				// claim holds is for who may read it (kubectl get pvc).
				out = append(out, policies.Violation{Policy: claimsPolicy, Builtin: true, Message: fmt.Sprintf(
					"%s.spec.%s: the PersistentVolumeClaim %q exists, and its spec.%s is not the template's %s: make the template match the claim (kubectl get pvc %s -o yaml), or delete the claim",
					path, field.name, name, field.name, field.template, name)})
			}
			if !retained {
				out = append(out, policies.Violation{Policy: claimsPolicy, Builtin: true, Message: fmt.Sprintf(
					"spec.volumeClaimPolicies[%d].retentionPolicy.whenDeleted: the PersistentVolumeClaim %q of %s exists already and would be deleted with the JobSet: set whenDeleted to Retain to use it, or delete the claim",
					i, name, path)})
			}
		}
	}
	return out, nil
}

// fieldDiff is a field of a claim's spec that differs from the template's,
// with the template's value as JSON.
type fieldDiff struct{ name, template string }

// claimSpecDiff lists the fields of the template's spec an existing claim
// does not match. accessModes, resources and selector are always compared;
// the others only when the template sets them, since the API server fills
// them in (the default storage class, volumeMode Filesystem, the bound
// volume's name, dataSourceRef from dataSource and back).
func claimSpecDiff(template, claim *corev1.PersistentVolumeClaimSpec) []fieldDiff {
	var out []fieldDiff
	compare := func(name string, set bool, t, c any) {
		if set && !equality.Semantic.DeepEqual(t, c) {
			out = append(out, fieldDiff{name: name, template: asJSON(t)})
		}
	}
	compare("accessModes", true, template.AccessModes, claim.AccessModes)
	compare("resources", true, template.Resources, claim.Resources)
	compare("selector", true, template.Selector, claim.Selector)
	compare("storageClassName", template.StorageClassName != nil, template.StorageClassName, claim.StorageClassName)
	compare("volumeMode", template.VolumeMode != nil, template.VolumeMode, claim.VolumeMode)
	compare("volumeName", template.VolumeName != "", template.VolumeName, claim.VolumeName)
	compare("dataSource", template.DataSource != nil, template.DataSource, claim.DataSource)
	compare("dataSourceRef", template.DataSourceRef != nil, template.DataSourceRef, claim.DataSourceRef)
	compare("volumeAttributesClassName", template.VolumeAttributesClassName != nil, template.VolumeAttributesClassName, claim.VolumeAttributesClassName)
	return out
}

func asJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
