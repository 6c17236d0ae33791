package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/policies"
	"github.com/inplace-dev/inplace/policies/review"
	"github.com/inplace-dev/inplace/webhook"
	"github.com/inplace-dev/inplace/webhook/offline/suite"
)

// newPolicyCommand groups the offline policy tools.
func newPolicyCommand(root *rootOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Evaluate, test and describe policies offline",
		Long: root.examples(`Evaluate Rego policies on a JobSet (eval), run Rego tests and policy
suites (test), and describe a JobSetPolicy (describe), with the policy
engine the validating webhook runs, and no cluster.`),
		Args: cobra.ArbitraryArgs,
		RunE: groupRunE,
	}
	cmd.AddCommand(newPolicyEvalCommand(root), newPolicyTestCommand(root), newPolicyDescribeCommand(root))
	return cmd
}

type policyEvalOptions struct {
	*rootOptions
	dir, params string
	files       fileFlags
	mutate      bool
}

func newPolicyEvalCommand(root *rootOptions) *cobra.Command {
	o := &policyEvalOptions{rootOptions: root}
	cmd := &cobra.Command{
		Use:   "eval -p DIR -f FILENAME",
		Short: "Evaluate the Rego policies of a directory on a JobSet",
		Long: root.examples(`Evaluate the Rego policies in a directory (one policy per .rego file,
*_test.rego files left out) on one JobSet, and print each deny, warn and
dryrun violation and each patch. The exit status is 1 if a policy denies.

It reads -f and -R as render does, as kubectl does: a file, a directory,
standard input (-), a List; together they must hold one object, a JobSet.
A field the JobSet does not know, or a key given twice, is an error.`),
		Example: root.examples(`  # Evaluate the example policies, with parameters
  inplacectl policy eval -p examples/policies -f jobset.yaml --params examples/policies/params.yaml

  # On the JobSet as the mutating webhook would store it
  inplacectl policy eval -p examples/policies -f jobset.yaml --mutate`),
		Args: noArgs("give the policies with -p DIR and the JobSet with -f FILENAME"),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context()) },
	}
	f := cmd.Flags()
	f.StringVarP(&o.dir, "policy-dir", "p", "", "the directory of Rego policies, one policy per .rego file")
	o.files.addFlags(cmd, "the JobSet manifest, one object")
	f.StringVar(&o.params, "params", "", "a YAML file passed to every policy as input.parameters")
	f.BoolVar(&o.mutate, "mutate", false, "evaluate the JobSet as the mutating webhook would store it")
	mustMark(cmd.MarkFlagRequired("policy-dir"))
	mustMark(cmd.MarkFlagDirname("policy-dir"))
	mustMark(cmd.MarkFlagFilename("params", "yaml", "yml", "json"))
	return cmd
}

func (o *policyEvalOptions) run(ctx context.Context) error {
	out := o.streams.Out
	var params any
	if o.params != "" {
		data, err := os.ReadFile(o.params)
		if err != nil {
			return fmt.Errorf("--params: %w", err)
		}
		if err := yaml.Unmarshal(data, &params); err != nil {
			return fmt.Errorf("--params: %s: %w", o.params, err)
		}
	}
	names, err := policies.BuiltinNames()
	if err != nil {
		return err
	}
	engine, err := policies.NewEngine(names) // the directory's policies alone
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(o.dir, "*.rego"))
	if err != nil {
		return err
	}
	loaded := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.rego") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		p, err := policies.Compile(policies.Source{Name: strings.TrimSuffix(filepath.Base(f), ".rego"), Rego: string(src), Parameters: params})
		if err != nil {
			return err
		}
		engine.SetPolicy(p)
		loaded++
	}
	if loaded == 0 {
		return fmt.Errorf("no policies (.rego files other than *_test.rego) in %s", o.dir)
	}
	js, err := o.files.readJobSet(o.streams.In)
	if err != nil {
		return err
	}
	raw, err := yaml.Marshal(js)
	if err == nil {
		raw, err = yaml.YAMLToJSON(raw)
	}
	if err != nil {
		return err
	}
	var obj map[string]any
	if err := yaml.Unmarshal(raw, &obj); err != nil {
		return err
	}
	cfg, _ := configv1alpha1.Load("")
	// The directory's policies judge; their patch rules are not applied
	// first.
	pipeline := webhook.Pipeline{Agent: cfg.Agent, Engine: engine, SkipPatchRules: true}
	in := review.Offline("CREATE", js.Namespace, obj, nil, nil)
	var d policies.Decision
	if o.mutate {
		v, err := pipeline.Admit(ctx, js, in, nil)
		if err != nil {
			return err
		}
		if v.Object == nil {
			return errors.New(v.Refusal)
		}
		d = v.Policies
	} else if d, err = pipeline.Evaluate(ctx, in); err != nil {
		return err
	}
	verdict(out, d)
	for _, p := range d.Patches {
		fmt.Fprintf(out, "patch  %s: %v\n", p.Policy, p.Op)
	}
	if len(d.Denied) > 0 {
		return exitCode(1)
	}
	return nil
}

func newPolicyTestCommand(root *rootOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "test DIR",
		Short: "Run the Rego tests and the policy suites under a directory",
		Long: root.examples(`Run the Rego tests (test_* rules) of the .rego files under DIR, and every
policy suite (suite.yaml) under DIR: each case's JobSet is defaulted and
injected, then the suite's JobSetPolicy alone decides (see
docs/reference/policy-library.md). The exit status is 1 if a test or a case fails.`),
		Example: root.examples(`  # The example policies' Rego tests
  inplacectl policy test examples/policies

  # Every suite of the policy library, or one
  inplacectl policy test policies/library
  inplacectl policy test policies/library/priority-class`),
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("%s takes one DIR, got %d arguments", cmd.CommandPath(), len(args))
			}
			return nil
		},
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return nil, cobra.ShellCompDirectiveFilterDirs
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return policyTest(cmd.Context(), args[0], root.streams.Out)
		},
	}
	return cmd
}

// policyTest runs the Rego tests of the .rego files under dir, and every
// policy suite (suite.yaml) under it.
func policyTest(ctx context.Context, dir string, out io.Writer) error {
	rego, err := hasRegoFiles(dir)
	if err != nil {
		return err
	}
	suites, err := suite.Find(dir)
	if err != nil {
		return err
	}
	if !rego && len(suites) == 0 {
		return fmt.Errorf("no .rego files and no %s under %s", suite.FileName, dir)
	}
	passed, failed := 0, 0
	report := func(ok bool, line string) {
		status := "PASS"
		if ok {
			passed++
		} else {
			status = "FAIL"
			failed++
		}
		fmt.Fprintf(out, "%s %s\n", status, line)
	}
	if rego {
		results, err := policies.RunRegoTests(ctx, os.DirFS(dir))
		if err != nil {
			return err
		}
		for _, r := range results {
			line := r.Name
			if r.Detail != "" {
				line += " (" + r.Detail + ")"
			}
			report(r.Passed, line)
		}
	}
	for _, path := range suites {
		name := filepath.Dir(path)
		res, err := suite.Run(ctx, path)
		if err != nil {
			report(false, fmt.Sprintf("%s: the suite did not run: %v", name, err))
			continue
		}
		for _, c := range res.Cases {
			report(c.Passed, fmt.Sprintf("%s: %s (%s)", name, c.Name, c.Why))
		}
	}
	fmt.Fprintf(out, "%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return exitCode(1)
	}
	return nil
}

func hasRegoFiles(dir string) (bool, error) {
	found := false
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".rego") {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found, err
}

func verdict(out io.Writer, d policies.Decision) {
	lines := map[string][]policies.Violation{"deny": d.Denied, "warn": d.Warned, "dryrun": d.DryRun}
	keys := []string{"deny", "warn", "dryrun"}
	total := 0
	for _, k := range keys {
		vs := lines[k]
		sort.Slice(vs, func(i, j int) bool { return vs[i].String() < vs[j].String() })
		for _, v := range vs {
			fmt.Fprintf(out, "# %-6s %s\n", k, v)
			total++
		}
	}
	if total == 0 {
		fmt.Fprintln(out, "# Policies: no violations")
	}
}

// readJobSet reads the one JobSet -f names, strictly: a field the JobSet
// does not know, or a key given twice, is an error, as policy eval has
// always read it. The builder keeps the last value of a key given twice
// (as kubectl does, which sends the API server no duplicate), so the
// source's text is read again for them.
func (f *fileFlags) readJobSet(stdin io.Reader) (*jobset.JobSet, error) {
	in, err := f.read(stdin)
	if err != nil {
		return nil, err
	}
	if n := len(in.objects); n > 1 {
		return nil, fmt.Errorf("%s: %d objects: policy eval takes one JobSet; split them, or use render, which answers each", strings.Join(f.names(), ", "), n)
	}
	obj := in.objects[0]
	if obj.GetKind() != jobset.Kind {
		return nil, fmt.Errorf("%s: kind is %s, want JobSet", obj.source, obj.GetKind())
	}
	raw, err := in.raw(obj.source)
	if err != nil {
		return nil, err
	}
	if err := duplicateKeys(raw); err != nil {
		return nil, fmt.Errorf("%s: %w", obj.source, err)
	}
	data, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	var js jobset.JobSet
	if err := d.Decode(&js); err != nil {
		return nil, fmt.Errorf("%s: %w", obj.source, err)
	}
	return &js, nil
}
