package coexist

import (
	"reflect"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// CRD is what matters of the installed JobSet CRD.
type CRD struct {
	// Installed: a CRD of the name exists.
	Installed bool
	// Ours: it carries the label make manifests puts on ours.
	Ours bool
	// Served: it serves jobset.x-k8s.io/v1alpha2, the version we speak.
	Served bool
	// Pruned are the status fields the controller writes that its
	// v1alpha2 schema lacks, as paths ("status.syncedEpoch",
	// "status.replicatedJobsStatus[].jobRestarts"): the API server drops
	// them from every write. Upstream's CRD lacks deprecatedEpoch,
	// inPlaceRestarts, syncedEpoch and syncedPods.
	Pruned []string
}

// InspectCRD reads the installed JobSet CRD; nil means none is installed.
func InspectCRD(crd *apiextensionsv1.CustomResourceDefinition) CRD {
	if crd == nil {
		return CRD{}
	}
	out := CRD{Installed: true, Ours: crd.Labels[jobset.CRDOwnerLabel] == jobset.CRDOwner}
	i := slices.IndexFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
		return v.Name == jobset.GroupVersion.Version && v.Served
	})
	if i < 0 {
		return out
	}
	out.Served = true
	var root *apiextensionsv1.JSONSchemaProps
	if v := crd.Spec.Versions[i]; v.Schema != nil {
		root = v.Schema.OpenAPIV3Schema
	}
	for _, path := range StatusFields() {
		if !keeps(root, strings.Split(path, ".")) {
			out.Pruned = append(out.Pruned, path)
		}
	}
	return out
}

// keeps says whether a schema keeps the field at path: every step is a
// declared property ("name[]" the items of an array property), or an
// object below it preserves unknown fields.
func keeps(s *apiextensionsv1.JSONSchemaProps, path []string) bool {
	for _, step := range path {
		if s == nil {
			return false
		}
		if s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields {
			return true
		}
		name, array := strings.CutSuffix(step, "[]")
		p, ok := s.Properties[name]
		if !ok {
			return false
		}
		s = &p
		if array {
			if s.Items == nil || s.Items.Schema == nil {
				return false
			}
			s = s.Items.Schema
		}
	}
	return s != nil
}

// StatusFields are the paths of the status fields the controller writes,
// read from the API's JobSetStatus: into the structs of the JobSet API
// (replicatedJobsStatus), not into those of other APIs (conditions are a
// metav1.Condition each, kept or pruned whole).
func StatusFields() []string {
	var out []string
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, t reflect.Type) {
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			path := prefix + name
			out = append(out, path)
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			step := path
			if ft.Kind() == reflect.Slice {
				ft, step = ft.Elem(), path+"[]"
			}
			if ft.Kind() == reflect.Struct && ft.PkgPath() == t.PkgPath() {
				walk(step+".", ft)
			}
		}
	}
	walk("status.", reflect.TypeFor[jobset.JobSetStatus]())
	return out
}
