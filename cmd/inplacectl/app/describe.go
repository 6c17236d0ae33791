package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
	"github.com/inplace-dev/inplace/policies"
	"github.com/inplace-dev/inplace/policies/params"
	"github.com/inplace-dev/inplace/webhook/offline/suite"
)

func newPolicyDescribeCommand(root *rootOptions) *cobra.Command {
	var filename string
	cmd := &cobra.Command{
		Use:   "describe -f FILENAME",
		Short: "Show a JobSetPolicy and check its parameters and its Rego",
		Long: root.examples(`Show a JobSetPolicy manifest: its enforcement action, target, Rego
version, match and exclude, its parametersSchema explained field by field,
its parameters checked against it (defaults applied), and whether its Rego
compiles. The exit status is 1 if the API server or the manager would
refuse it.`),
		Example: root.examples(`  inplacectl policy describe -f policies/library/max-pods-per-jobset/policy.yaml`),
		Args:    noArgs("give the JobSetPolicy with -f FILENAME"),
		RunE: func(*cobra.Command, []string) error {
			return policyDescribe(filename, root.streams.Out)
		},
	}
	cmd.Flags().StringVarP(&filename, "filename", "f", "", "the JobSetPolicy manifest")
	mustMark(cmd.MarkFlagRequired("filename"))
	mustMark(cmd.MarkFlagFilename("filename", "yaml", "yml", "json"))
	return cmd
}

// policyDescribe shows what a JobSetPolicy manifest says and checks what
// the API server and the manager would check: its parameters against its
// schema, and its Rego. It exits 1 if either fails.
func policyDescribe(file string, out io.Writer) error {
	p, err := suite.ReadPolicy(file)
	if err != nil {
		return err
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
			return fmt.Errorf("%s: spec.parameters: %w", file, err)
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
			return err
		}
		fmt.Fprint(out, indent(string(y)))
	}
	_, err = policies.Compile(policies.Source{
		Name: p.Name, Rego: spec.Rego, RegoVersion: policies.RegoVersion(spec.RegoVersion),
		Target: policies.Target(spec.Target), Parameters: values,
	})
	if err != nil {
		fmt.Fprintf(out, "Rego:               does not compile:\n%s", indent(err.Error()+"\n"))
		return exitCode(1)
	}
	fmt.Fprintln(out, "Rego:               compiles")
	return exitCode(code)
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
