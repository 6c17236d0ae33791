package offline

import (
	"context"
	"fmt"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// crdSchema applies one version of a CustomResourceDefinition to objects
// as the API server does, with the API server's own code: pruning and
// defaulting when an object is decoded, and the custom resource strategy
// (metadata, OpenAPI schema, list types, CEL rules) when it is created.
type crdSchema struct {
	kind       schema.GroupVersionKind
	structural *structuralschema.Structural
	prepare    func(context.Context, *unstructured.Unstructured)
	validate   func(context.Context, *unstructured.Unstructured) error
}

// newCRDSchema reads version of the CustomResourceDefinition in crdYAML.
func newCRDSchema(crdYAML []byte, version string) (*crdSchema, error) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(crdYAML, &crd); err != nil {
		return nil, fmt.Errorf("reading the CustomResourceDefinition: %w", err)
	}
	var v *apiextensionsv1.CustomResourceDefinitionVersion
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == version {
			v = &crd.Spec.Versions[i]
		}
	}
	if v == nil || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("the CustomResourceDefinition %s has no schema for version %s", crd.Name, version)
	}
	var internal apiextensionsinternal.CustomResourceValidation
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, &internal, nil); err != nil {
		return nil, err
	}
	structural, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("the CustomResourceDefinition's schema is not structural: %w", err)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, err
	}
	kind := schema.GroupVersionKind{Group: crd.Spec.Group, Version: version, Kind: crd.Spec.Names.Kind}
	namespaced := crd.Spec.Scope == apiextensionsv1.NamespaceScoped
	hasStatus := v.Subresources != nil && v.Subresources.Status != nil
	// Compiled once, as the API server compiles a CRD's rules once.
	rules := cel.NewValidator(structural, true, celconfig.PerCallLimit)
	return &crdSchema{
		kind:       kind,
		structural: structural,
		// The custom resource strategy's PrepareForCreate.
		prepare: func(_ context.Context, u *unstructured.Unstructured) {
			if hasStatus {
				delete(u.Object, "status")
			}
			u.SetGeneration(1)
		},
		// The custom resource strategy's Validate, step by step with the
		// functions it calls (the strategy's package brings the API
		// server's storage along).
		validate: func(ctx context.Context, u *unstructured.Unstructured) error {
			var errs field.ErrorList
			if u.GetKind() != kind.Kind {
				errs = append(errs, field.Invalid(field.NewPath("kind"), u.GetKind(), fmt.Sprintf("must be %v", kind.Kind)))
			}
			if u.GetAPIVersion() != kind.GroupVersion().String() {
				errs = append(errs, field.Invalid(field.NewPath("apiVersion"), u.GetAPIVersion(), fmt.Sprintf("must be %v", kind.GroupVersion())))
			}
			if len(errs) == 0 {
				errs = append(errs, metavalidation.ValidateObjectMetaAccessor(u, namespaced, metavalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
				errs = append(errs, apiservervalidation.ValidateCustomResource(nil, u.UnstructuredContent(), validator)...)
				errs = append(errs, schemaobjectmeta.Validate(nil, u.Object, structural, false)...)
				errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, structural, u.Object)...)
				if blocking(errs) {
					errs = append(errs, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"))
				} else {
					celErrs, _ := rules.Validate(ctx, nil, structural, u.Object, nil, celconfig.RuntimeCELCostBudget)
					errs = append(errs, celErrs...)
				}
			}
			if len(errs) > 0 {
				return apierrors.NewInvalid(kind.GroupKind(), u.GetName(), errs)
			}
			return nil
		},
	}, nil
}

// blocking reports whether errs hold an error after which the API server
// does not evaluate the CEL rules.
func blocking(errs field.ErrorList) bool {
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true
		}
	}
	return false
}

// decode does to an object what the API server does when it reads one from
// a request or a webhook's patch: drop the fields the schema does not know,
// and apply its defaults.
func (s *crdSchema) decode(obj map[string]any) {
	structuralpruning.Prune(obj, s.structural, true)
	structuraldefaulting.Default(obj, s.structural)
}
