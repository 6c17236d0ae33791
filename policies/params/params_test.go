package params

import (
	"bytes"
	"strings"
	"testing"
)

const schema = `{
  "type": "object",
  "required": ["maxPods"],
  "properties": {
    "maxPods": {"type": "integer", "minimum": 1, "description": "the most Pods a JobSet may run"},
    "registries": {"type": "array", "items": {"type": "string"}},
    "tier": {"type": "string", "enum": ["dev", "prod"], "default": "dev"}
  }
}`

func TestValidateNamesTheField(t *testing.T) {
	s, err := Compile([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		params map[string]any
		want   []string
	}{
		"valid":         {params: map[string]any{"maxPods": 8}},
		"wrong type":    {params: map[string]any{"maxPods": "eight"}, want: []string{`spec.parameters.maxPods: Invalid value: "string": maxPods in body must be of type integer`}},
		"below minimum": {params: map[string]any{"maxPods": 0}, want: []string{"spec.parameters.maxPods: Invalid value: 0: maxPods in body should be greater than or equal to 1"}},
		"missing":       {params: map[string]any{}, want: []string{"spec.parameters.maxPods: Required value"}},
		"typo":          {params: map[string]any{"maxPods": 8, "maxPod": 9}, want: []string{`spec.parameters.maxPod: Invalid value: "maxPod": unknown field: spec.parametersSchema names only maxPods, registries, tier here`}},
		"item type":     {params: map[string]any{"maxPods": 8, "registries": []any{1}}, want: []string{"spec.parameters.registries[0]"}},
		"enum":          {params: map[string]any{"maxPods": 8, "tier": "staging"}, want: []string{`spec.parameters.tier: Unsupported value: "staging": supported values: "dev", "prod"`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			errs := s.Validate(tc.params)
			if len(errs) != len(tc.want) {
				t.Fatalf("errors %v, want %d", errs, len(tc.want))
			}
			for i, want := range tc.want {
				if !strings.Contains(errs[i].Error(), want) {
					t.Errorf("error %q, want it to contain %q", errs[i].Error(), want)
				}
			}
		})
	}
}

func TestValidateDefaults(t *testing.T) {
	s, err := Compile([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	p := map[string]any{"maxPods": 8}
	if errs := s.Validate(p); len(errs) > 0 {
		t.Fatal(errs)
	}
	if p["tier"] != "dev" {
		t.Errorf("tier %v, want the schema's default dev", p["tier"])
	}
}

func TestCompileRefusesANonStructuralSchema(t *testing.T) {
	cases := map[string]string{
		"root not an object": `{"type": "string"}`,
		"untyped field":      `{"type": "object", "properties": {"x": {"description": "no type"}}}`,
		"unknown keyword":    `{"type": "object", "propertiez": {}}`,
		"a CEL rule":         `{"type": "object", "properties": {"x": {"type": "integer", "x-kubernetes-validations": [{"rule": "self > 1"}]}}}`,
		"a wrong default":    `{"type": "object", "properties": {"x": {"type": "integer", "default": "one"}}}`,
	}
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Compile([]byte(raw))
			if err == nil || !strings.Contains(err.Error(), "spec.parametersSchema") {
				t.Fatalf("error %v, want one naming spec.parametersSchema", err)
			}
		})
	}
}

func TestExplain(t *testing.T) {
	s, err := Compile([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	s.Explain(&out)
	for _, want := range []string{"parameters\t<object>", "  maxPods\t<integer> -required- (minimum: 1)", "    the most Pods a JobSet may run", "  registries\t<[]string>", `  tier	<string> (enum: "dev", "prod"; default: "dev")`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("explain lacks %q:\n%s", want, out.String())
		}
	}
}
