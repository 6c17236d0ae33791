package params

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	schemaPath = field.NewPath("spec", "parametersSchema")
	paramsPath = field.NewPath("spec", "parameters")
)

// Schema is a parametersSchema, checked to be structural.
type Schema struct {
	props      apiextensionsv1.JSONSchemaProps
	structural *structuralschema.Structural
	validator  validation.SchemaValidator
}

// Compile parses raw, a parametersSchema as JSON, and checks that it is a
// structural schema whose root is an object, as a CRD's must be.
func Compile(raw []byte) (*Schema, error) {
	s := &Schema{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s.props); err != nil {
		return nil, fmt.Errorf("%s: not an OpenAPI v3 schema: %w", schemaPath, err)
	}
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(&s.props, &internal, nil); err != nil {
		return nil, fmt.Errorf("%s: %w", schemaPath, err)
	}
	if path := celRules(&internal, schemaPath); path != nil {
		return nil, field.Forbidden(path.Child("x-kubernetes-validations"), "CEL rules are not evaluated on parameters; express the rule in the policy's Rego, or with the schema's own keywords (enum, pattern, minimum, ...)")
	}
	if internal.Type != "object" {
		return nil, field.Invalid(schemaPath.Child("type"), internal.Type, `the root of a parameters schema has type "object"`)
	}
	structural, err := structuralschema.NewStructural(&internal)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", schemaPath, err)
	}
	if errs := structuralschema.ValidateStructural(schemaPath, structural); len(errs) > 0 {
		return nil, fmt.Errorf("the schema is not structural (every field needs a type, as in a CRD): %w", errs.ToAggregate())
	}
	validator, _, err := validation.NewSchemaValidator(&internal)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", schemaPath, err)
	}
	s.structural, s.validator = structural, validator
	// The schema's defaults must themselves validate: a wrong-typed
	// default would otherwise surface later as an error in
	// spec.parameters that the parameters did not cause.
	empty := map[string]any{}
	structuraldefaulting.Default(empty, structural)
	if len(empty) > 0 {
		// Only what the defaults hold: the fields they leave out are the
		// parameters' to give.
		errs := validation.ValidateCustomResource(schemaPath.Child("default"), empty, validator).Filter(func(err error) bool {
			var e *field.Error
			return errors.As(err, &e) && e.Type == field.ErrorTypeRequired
		})
		if len(errs) > 0 {
			return nil, fmt.Errorf("the schema's defaults break the schema: %w", errs.ToAggregate())
		}
	}
	return s, nil
}

// celRules returns the path of the first schema with x-kubernetes-validations,
// or nil.
func celRules(p *apiextensions.JSONSchemaProps, path *field.Path) *field.Path {
	if len(p.XValidations) > 0 {
		return path
	}
	for name, child := range p.Properties {
		if found := celRules(&child, path.Child("properties").Key(name)); found != nil {
			return found
		}
	}
	if p.Items != nil && p.Items.Schema != nil {
		if found := celRules(p.Items.Schema, path.Child("items")); found != nil {
			return found
		}
	}
	if p.AdditionalProperties != nil && p.AdditionalProperties.Schema != nil {
		return celRules(p.AdditionalProperties.Schema, path.Child("additionalProperties"))
	}
	return nil
}

// Validate defaults params from the schema's defaults, in place, and
// checks them against it: a type, a format, an enum, a bound or a
// required field broken, and any field the schema does not name (unless
// it preserves unknown fields), each with its path under
// spec.parameters.
func (s *Schema) Validate(params map[string]any) field.ErrorList {
	if params == nil {
		params = map[string]any{}
	}
	structuraldefaulting.Default(params, s.structural)
	errs := validation.ValidateCustomResource(paramsPath, params, s.validator)
	// A field the schema does not name is a typo until it says otherwise:
	// pruning it as the apiserver would for a CRD would leave the policy
	// without the value its author meant it to have.
	copied := deepCopy(params)
	unknown := pruning.PruneWithOptions(copied, s.structural, false, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	for _, p := range unknown {
		path := parsePath(p)
		names := s.fieldNames(p)
		detail := "unknown field: spec.parametersSchema names no such field"
		if len(names) > 0 {
			detail = fmt.Sprintf("unknown field: spec.parametersSchema names only %s here", strings.Join(names, ", "))
		}
		errs = append(errs, field.Invalid(path, path.String()[strings.LastIndex(path.String(), ".")+1:], detail))
	}
	return errs
}

// fieldNames lists the fields the schema allows beside the unknown one.
func (s *Schema) fieldNames(unknownPath string) []string {
	parts := strings.Split(unknownPath, ".")
	node := s.structural
	for _, p := range parts[:len(parts)-1] {
		name, indexed, _ := strings.Cut(p, "[")
		next, ok := node.Properties[name]
		if !ok {
			return nil
		}
		node = &next
		if indexed != "" && node.Items != nil {
			node = node.Items
		}
	}
	names := make([]string, 0, len(node.Properties))
	for n := range node.Properties {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// parsePath turns a path the pruning reports (a.b[0].c, under
// parameters) into a field path under spec.parameters.
func parsePath(p string) *field.Path {
	path := paramsPath
	for _, part := range strings.Split(p, ".") {
		path = path.Child(part)
	}
	return path
}

func deepCopy(v map[string]any) map[string]any {
	raw, _ := json.Marshal(v)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return out
}

// Explain writes the schema as `kubectl explain --recursive` does: each
// field with its type, required or not, and its description.
func (s *Schema) Explain(w io.Writer) {
	explain(w, "parameters", &s.props, 0, true)
}

func explain(w io.Writer, name string, p *apiextensionsv1.JSONSchemaProps, depth int, required bool) {
	typ := p.Type
	if typ == "array" && p.Items != nil && p.Items.Schema != nil {
		typ = "[]" + p.Items.Schema.Type
	}
	if typ == "" {
		typ = "<any>"
	}
	line := fmt.Sprintf("%s%s\t<%s>", strings.Repeat("  ", depth), name, typ)
	if required {
		line += " -required-"
	}
	var facts []string
	if len(p.Enum) > 0 {
		var vals []string
		for _, e := range p.Enum {
			vals = append(vals, string(e.Raw))
		}
		facts = append(facts, "enum: "+strings.Join(vals, ", "))
	}
	if p.Default != nil {
		facts = append(facts, "default: "+string(p.Default.Raw))
	}
	if p.Minimum != nil {
		facts = append(facts, fmt.Sprintf("minimum: %v", *p.Minimum))
	}
	if p.Maximum != nil {
		facts = append(facts, fmt.Sprintf("maximum: %v", *p.Maximum))
	}
	if p.Pattern != "" {
		facts = append(facts, "pattern: "+p.Pattern)
	}
	if len(facts) > 0 {
		line += " (" + strings.Join(facts, "; ") + ")"
	}
	fmt.Fprintln(w, line)
	if p.Description != "" {
		fmt.Fprintf(w, "%s  %s\n", strings.Repeat("  ", depth), p.Description)
	}
	props := p.Properties
	if p.Type == "array" && p.Items != nil && p.Items.Schema != nil {
		props = p.Items.Schema.Properties
		p = p.Items.Schema
	}
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		child := props[n]
		explain(w, n, &child, depth+1, slices.Contains(p.Required, n))
	}
}
