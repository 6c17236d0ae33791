package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/cmd/internal/version"
	"github.com/inplace-dev/inplace/policies"
	"github.com/inplace-dev/inplace/policies/suite"
	"github.com/inplace-dev/inplace/webhook"
	"github.com/inplace-dev/inplace/webhook/offline"
)

const usage = `inplacectl: offline tools for inplace

  inplacectl render -f JOBSET.yaml [-n NAMESPACE] [-config CONFIG.yaml]
      answer a create of the JobSet as the API server with inplace's CRD
      and webhooks would (schema, defaults, CEL rules, injection, policies):
      print every decision, the verdict with the API server's text, and the
      JobSet it would store; every document of the file, separated by ---
      (-f - reads standard input; a file with no document is an error)
  inplacectl policy eval -p DIR -f JOBSET.yaml [-params PARAMS.yaml] [-mutate]
      evaluate the Rego policies in DIR (one policy per .rego file) on a JobSet
  inplacectl policy test DIR
      run the Rego tests (test_* rules) of the .rego files under DIR, and
      every policy suite (suite.yaml) under DIR: each case's JobSet is
      defaulted and injected, then the suite's JobSetPolicy alone decides
      (see docs/policy-library.md)
  inplacectl policy describe -f POLICY.yaml
      show a JobSetPolicy: its enforcement action, target, Rego version,
      match and exclude, its parametersSchema explained field by field, its
      parameters checked against it (defaults applied), and whether its
      Rego compiles
  inplacectl status JOBSET [-n NAMESPACE] [-kubeconfig PATH]
      show a JobSet's epochs, the barrier of every replicated job and the
      timeline of its last in-place restart, from the cluster
  inplacectl version
      print the version of this build

Exit status: 0 on success, 1 when a policy denies, a test fails or a described
policy is invalid, 2 on bad usage.
`

// Run runs inplacectl with args (without the program name).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	code := 0
	switch {
	case args[0] == "render":
		code, err = render(ctx, args[1:], stdout)
	case len(args) > 1 && args[0] == "policy" && args[1] == "eval":
		code, err = policyEval(ctx, args[2:], stdout)
	case len(args) > 1 && args[0] == "policy" && args[1] == "test":
		code, err = policyTest(ctx, args[2:], stdout)
	case len(args) > 1 && args[0] == "policy" && args[1] == "describe":
		code, err = policyDescribe(args[2:], stdout)
	case args[0] == "status":
		code, err = status(ctx, args[1:], stdout)
	case args[0] == "version" || args[0] == "--version":
		fmt.Fprintln(stdout, "inplacectl", version.Get())
		return 0
	case args[0] == "help" || args[0] == "-h" || args[0] == "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "inplacectl: unknown command %q\n\n%s", strings.Join(args, " "), usage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "inplacectl:", err)
		var u usageError
		if errors.As(err, &u) {
			return 2
		}
		return 1
	}
	return code
}

type usageError struct{ error }

func render(ctx context.Context, args []string, out io.Writer) (int, error) {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	file := fs.String("f", "", "the JobSet manifest")
	configFile := fs.String("config", "", "the manager configuration (agent image, ports, disabled built-ins)")
	namespace := fs.String("n", "default", "the namespace of a JobSet whose manifest names none")
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil || *file == "" {
		return 2, usageError{fmt.Errorf("render needs -f JOBSET.yaml")}
	}
	cfg, err := configv1alpha1.Load(*configFile)
	if err != nil {
		return 1, err
	}
	docs, err := readDocuments(*file)
	if err != nil {
		return 1, err
	}
	engine, err := policies.NewEngine(cfg.Policies.DisabledBuiltins)
	if err != nil {
		return 1, err
	}
	engine.SetLimits(policies.Limits{PolicyTimeout: cfg.Policies.EvaluationTimeout.Duration, TotalTimeout: cfg.Policies.RequestTimeout.Duration})
	admitter, err := offline.NewAdmitter(cfg.Agent, engine)
	if err != nil {
		return 1, err
	}
	// Every document, as kubectl apply -f sends every one: the exit
	// status is 1 if any is refused.
	code, rendered := 0, 0
	for i, manifest := range docs {
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(manifest, &meta); err == nil && meta.Kind != "" && meta.Kind != jobset.Kind {
			// A JobSet's file often holds its ServiceAccount too: what
			// is not a JobSet is named and passed over.
			fmt.Fprintf(out, "# Skipped: %s %s %s: render answers JobSets\n", meta.APIVersion, meta.Kind, meta.Metadata.Name)
			continue
		}
		if rendered > 0 {
			fmt.Fprintln(out, "---")
		}
		rendered++
		c, err := renderOne(ctx, admitter, manifest, *namespace, out)
		if err != nil {
			where := *file
			if len(docs) > 1 {
				where = fmt.Sprintf("%s (document %d)", *file, i+1)
			}
			return 1, fmt.Errorf("%s: %w", where, err)
		}
		code = max(code, c)
	}
	if rendered == 0 {
		name := *file
		if name == "-" {
			name = "standard input"
		}
		return 1, fmt.Errorf("%s: no JobSet in it", name)
	}
	return code, nil
}

// renderOne answers the create of one manifest.
func renderOne(ctx context.Context, admitter *offline.Admitter, manifest []byte, namespace string, out io.Writer) (int, error) {
	res, err := admitter.Create(ctx, manifest, namespace)
	if err != nil {
		return 1, err
	}
	if res.Stored == nil {
		// Refused before the validating webhook: nothing to show but why.
		fmt.Fprintf(out, "# Verdict: refused: %s\n", res.Refusal)
		return 1, nil
	}
	fmt.Fprintln(out, "# Decisions:")
	if len(res.Injected) == 0 {
		fmt.Fprintln(out, "#   defaults only: injection applies to restartStrategy InPlaceRestart (and not with inplace.dev/inject: \"false\")")
	}
	for _, d := range res.Injected {
		fmt.Fprintf(out, "#   %s %s: %s\n", d.What, d.Where, d.Why)
	}
	verdict(out, res.Policies)
	stored, err := yaml.JSONToYAML(res.Stored)
	if err != nil {
		return 1, err
	}
	if res.Refusal != "" {
		fmt.Fprintf(out, "# Verdict: refused: %s\n", res.Refusal)
		fmt.Fprint(out, string(stored))
		return 1, nil
	}
	fmt.Fprintln(out, "# Verdict: accepted")
	fmt.Fprint(out, string(stored))
	return 0, nil
}

func policyEval(ctx context.Context, args []string, out io.Writer) (int, error) {
	fs := flag.NewFlagSet("policy eval", flag.ContinueOnError)
	dir := fs.String("p", "", "directory of Rego policies")
	file := fs.String("f", "", "the JobSet manifest")
	paramsFile := fs.String("params", "", "YAML passed to every policy as input.parameters")
	mutate := fs.Bool("mutate", false, "evaluate the JobSet as the mutating webhook would store it")
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil || *dir == "" || *file == "" {
		return 2, usageError{fmt.Errorf("policy eval needs -p DIR and -f JOBSET.yaml")}
	}
	var params any
	if *paramsFile != "" {
		data, err := os.ReadFile(*paramsFile)
		if err != nil {
			return 1, err
		}
		if err := yaml.Unmarshal(data, &params); err != nil {
			return 1, fmt.Errorf("%s: %w", *paramsFile, err)
		}
	}
	names, err := policies.BuiltinNames()
	if err != nil {
		return 1, err
	}
	engine, err := policies.NewEngine(names) // the directory's policies alone
	if err != nil {
		return 1, err
	}
	files, err := filepath.Glob(filepath.Join(*dir, "*.rego"))
	if err != nil {
		return 1, err
	}
	loaded := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.rego") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			return 1, err
		}
		p, err := policies.Compile(policies.Source{Name: strings.TrimSuffix(filepath.Base(f), ".rego"), Rego: string(src), Parameters: params})
		if err != nil {
			return 1, err
		}
		engine.SetPolicy(p)
		loaded++
	}
	if loaded == 0 {
		return 1, fmt.Errorf("no policies (.rego files other than *_test.rego) in %s", *dir)
	}
	js, err := readJobSet(*file)
	if err != nil {
		return 1, err
	}
	cfg, _ := configv1alpha1.Load("")
	var raw []byte
	if *mutate {
		raw, _, err = webhook.Mutate(ctx, js, cfg.Agent, nil, policies.Input{})
	} else {
		raw, err = yaml.Marshal(js)
		if err == nil {
			raw, err = yaml.YAMLToJSON(raw)
		}
	}
	if err != nil {
		return 1, err
	}
	var obj map[string]any
	if err := yaml.Unmarshal(raw, &obj); err != nil {
		return 1, err
	}
	d, err := engine.Evaluate(ctx, policies.Input{Operation: "CREATE", Object: obj, Namespace: js.Namespace, Labels: js.Labels})
	if err != nil {
		return 1, err
	}
	verdict(out, d)
	for _, p := range d.Patches {
		fmt.Fprintf(out, "patch  %s: %v\n", p.Policy, p.Op)
	}
	if len(d.Denied) > 0 {
		return 1, nil
	}
	return 0, nil
}

// policyTest runs the Rego tests of the .rego files under DIR, and every
// policy suite (suite.yaml) under it.
func policyTest(ctx context.Context, args []string, out io.Writer) (int, error) {
	if len(args) != 1 {
		return 2, usageError{fmt.Errorf("policy test needs one DIR")}
	}
	dir := args[0]
	rego, err := hasRegoFiles(dir)
	if err != nil {
		return 1, err
	}
	suites, err := suite.Find(dir)
	if err != nil {
		return 1, err
	}
	if !rego && len(suites) == 0 {
		return 1, fmt.Errorf("no .rego files and no %s under %s", suite.FileName, dir)
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
			return 1, err
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
		return 1, nil
	}
	return 0, nil
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

func readJobSet(path string) (*jobset.JobSet, error) {
	docs, err := readDocuments(path)
	if err != nil {
		return nil, err
	}
	if len(docs) > 1 {
		return nil, fmt.Errorf("%s: %d documents: policy eval takes one JobSet; split the file, or use render, which answers each", path, len(docs))
	}
	data := docs[0]
	var js jobset.JobSet
	if err := yaml.UnmarshalStrict(data, &js); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if js.Kind != "" && js.Kind != jobset.Kind {
		return nil, fmt.Errorf("%s: kind is %s, want JobSet", path, js.Kind)
	}
	return &js, nil
}
