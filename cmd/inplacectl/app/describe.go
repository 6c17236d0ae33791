package app

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
	"github.com/inplace-dev/inplace/policies"
	"github.com/inplace-dev/inplace/policies/params"
	"github.com/inplace-dev/inplace/policies/suite"
)

// policyDescribe shows what a JobSetPolicy manifest says and checks what
// the API server and the manager would check: its parameters against its
// schema, and its Rego. It exits 1 if either fails.
func policyDescribe(args []string, out io.Writer) (int, error) {
	fs := flag.NewFlagSet("policy describe", flag.ContinueOnError)
	file := fs.String("f", "", "the JobSetPolicy manifest")
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil || *file == "" || fs.NArg() > 0 {
		return 2, usageError{fmt.Errorf("policy describe needs -f POLICY.yaml")}
	}
	p, err := suite.ReadPolicy(*file)
	if err != nil {
		return 1, err
	}
	spec := &p.Spec
	orDefault := func(v, def string) string {
		if v == "" {
			return def + " (default)"
		}
		return v
	}
	fmt.Fprintf(out, "Name:               %s\n", p.Name)
	fmt.Fprintf(out, "EnforcementAction:  %s\n", orDefault(string(spec.EnforcementAction), string(policyv1alpha1.Deny)))
	fmt.Fprintf(out, "Target:             %s\n", orDefault(string(spec.Target), string(policyv1alpha1.TargetJobSet)))
	fmt.Fprintf(out, "RegoVersion:        %s\n", orDefault(string(spec.RegoVersion), string(policyv1alpha1.RegoV1)))
	section(out, "Match", spec.Match, "every JobSet, every request")
	section(out, "Exclude", spec.Exclude, "nothing")

	code := 0
	var values map[string]any
	if spec.Parameters != nil && len(spec.Parameters.Raw) > 0 {
		if err := json.Unmarshal(spec.Parameters.Raw, &values); err != nil {
			return 1, fmt.Errorf("%s: spec.parameters: %w", *file, err)
		}
	}
	var schema *params.Schema
	if spec.ParametersSchema == nil || len(spec.ParametersSchema.Raw) == 0 {
		fmt.Fprintln(out, "ParametersSchema:   <none>: parameters are passed unchecked")
	} else if schema, err = params.Compile(spec.ParametersSchema.Raw); err != nil {
		fmt.Fprintf(out, "ParametersSchema:   invalid: %v\n", err)
		code = 1
	} else {
		fmt.Fprintln(out, "ParametersSchema:")
		var b bytes.Buffer
		schema.Explain(&b)
		fmt.Fprint(out, indent(b.String()))
	}
	var errs []string
	if schema != nil {
		if values == nil {
			values = map[string]any{}
		}
		for _, e := range schema.Validate(values) {
			errs = append(errs, e.Error())
		}
	}
	switch {
	case len(errs) > 0:
		fmt.Fprintln(out, "Parameters:         invalid: the API server refuses this policy")
		for _, e := range errs {
			fmt.Fprintf(out, "  %s\n", e)
		}
		code = 1
	case values == nil:
		fmt.Fprintln(out, "Parameters:         <none>")
	default:
		label := "Parameters:"
		if schema != nil {
			label += " (valid, the schema's defaults applied)"
		}
		fmt.Fprintln(out, label)
		y, err := yaml.Marshal(values)
		if err != nil {
			return 1, err
		}
		fmt.Fprint(out, indent(string(y)))
	}
	_, err = policies.Compile(policies.Source{
		Name: p.Name, Rego: spec.Rego, RegoVersion: policies.RegoVersion(spec.RegoVersion),
		Target: policies.Target(spec.Target), Parameters: values,
	})
	if err != nil {
		fmt.Fprintf(out, "Rego:               does not compile:\n%s", indent(err.Error()+"\n"))
		return 1, nil
	}
	fmt.Fprintln(out, "Rego:               compiles")
	return code, nil
}

// section prints a field as YAML under its name, or what its absence means.
func section(out io.Writer, name string, v any, none string) {
	raw, err := yaml.Marshal(v)
	if err != nil || string(raw) == "null\n" || string(raw) == "{}\n" {
		fmt.Fprintf(out, "%-20s<none>: %s\n", name+":", none)
		return
	}
	fmt.Fprintf(out, "%s:\n%s", name, indent(string(raw)))
}

func indent(s string) string {
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines {
		if l == "" {
			continue
		}
		b.WriteString("  " + l)
	}
	return b.String()
}
