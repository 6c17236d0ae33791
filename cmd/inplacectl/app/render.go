package app

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/policies"
	"github.com/inplace-dev/inplace/webhook/offline"
)

type renderOptions struct {
	*rootOptions
	files  fileFlags
	config string
	output string
}

// renderFormats are the values of render's --output: the JobSets the API
// server would store, and nothing else, for a pipe to kubectl apply -f -.
var renderFormats = []string{"json", "yaml"}

func newRenderCommand(root *rootOptions) *cobra.Command {
	o := &renderOptions{rootOptions: root}
	cmd := &cobra.Command{
		Use:   "render -f FILENAME",
		Short: "Answer the create of JobSets as the API server with inplace's CRD and webhooks would",
		Long: root.examples(`Answer the create of every JobSet in a manifest as the API server with
inplace's CRD and webhooks would, offline: strict field validation, the
CRD's schema, defaults and CEL rules, the mutating webhook's injection and
the validating webhook's policies.

For each JobSet it prints every decision, the policies' violations, the
verdict with the API server's own text, and the JobSet it would store.
Objects other than JobSets are named and passed over; input with no
object, or with no JobSet, is an error. A JobSet whose manifest names no
namespace is created in -n, else the kubeconfig context's namespace, else
default, as kubectl apply -f would.

It reads -f as kubectl does, with no server: a file, a directory (its
.json, .yaml and .yml files; with -R its subdirectories' too), - for
standard input, -f repeated, in order; documents separated by ---, and a
List as its items.

render also warns of what the API server admits but the Jobs then refuse
(a container without an image).

With -o json or -o yaml it prints only the JobSets the API server would
store, to pipe to kubectl apply -f -; the decisions and verdicts go to
standard error. The exit status is 1 if any JobSet is refused.`),
		Example: root.examples(`  # The API server's answer, what it would store, and why
  inplacectl render -f jobset.yaml

  # From standard input, in a namespace
  cat jobset.yaml | inplacectl render -f - -n ml

  # Every JobSet of a directory and its subdirectories, and of one more file
  inplacectl render -f manifests/ -R -f extra.yaml

  # Only the JobSet as stored, to apply it
  inplacectl render -f jobset.yaml -o yaml | kubectl apply -f -

  # With the manager's configuration (agent image, ports, disabled built-ins)
  inplacectl render -f jobset.yaml --config manager-config.yaml`),
		Args: noArgs("give the manifest with -f FILENAME"),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context()) },
	}
	f := cmd.Flags()
	o.files.addFlags(cmd, "the manifests: JobSets (other objects are passed over)")
	f.StringVar(&o.config, "config", "", "the manager's configuration file (agent image and ports, policy limits, disabled built-ins); default: the built-in defaults")
	f.StringVarP(&o.output, "output", "o", "", "json or yaml: print only the JobSets the API server would store (decisions to standard error)")
	mustMark(cmd.MarkFlagFilename("config", "yaml", "yml"))
	mustMark(cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(renderFormats, cobra.ShellCompDirectiveNoFileComp)))
	return cmd
}

func (o *renderOptions) run(ctx context.Context) error {
	var printer printers.ResourcePrinter
	if o.output != "" {
		if !slices.Contains(renderFormats, o.output) {
			return usageErrorf("--output %q: use json or yaml, or leave it out for the decisions and verdicts too", o.output)
		}
		p, err := genericclioptions.NewJSONYamlPrintFlags().ToPrinter(o.output)
		if err != nil {
			return err
		}
		printer = p
	}
	namespace, err := o.namespace()
	if err != nil {
		return err
	}
	cfg, err := configv1alpha1.Load(o.config)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	in, err := o.files.read(o.streams.In)
	if err != nil {
		return err
	}
	engine, err := policies.NewEngine(cfg.Policies.DisabledBuiltins)
	if err != nil {
		return err
	}
	engine.SetLimits(policies.Limits{PolicyTimeout: cfg.Policies.EvaluationTimeout.Duration, TotalTimeout: cfg.Policies.RequestTimeout.Duration})
	admitter, err := offline.NewAdmitter(cfg.Agent, engine)
	if err != nil {
		return err
	}

	// In the default output the notes and the JobSets are one report on
	// standard output; with -o the JobSets alone are.
	notes := o.streams.Out
	if printer != nil {
		notes = o.streams.ErrOut
	}
	// The objects of each source, to name one of several.
	perSource := map[string]int{}
	for _, obj := range in.objects {
		perSource[obj.source]++
	}
	// Every object, as kubectl apply -f sends every one: the exit status
	// is 1 if any is refused.
	code, rendered, nth := 0, 0, map[string]int{}
	for _, obj := range in.objects {
		nth[obj.source]++
		if obj.GetKind() != jobset.Kind {
			// A JobSet's file often holds its ServiceAccount too: what
			// is not a JobSet is named and passed over.
			fmt.Fprintf(notes, "# Skipped: %s %s %s: render answers JobSets\n", obj.GetAPIVersion(), obj.GetKind(), obj.GetName())
			continue
		}
		if rendered > 0 {
			fmt.Fprintln(notes, "---")
		}
		rendered++
		// Unstructured, the object keeps the fields the schema does not
		// know, for strict field validation to refuse.
		manifest, err := obj.MarshalJSON()
		if err != nil {
			return fmt.Errorf("%s: %w", obj.source, err)
		}
		res, err := admitter.Create(ctx, manifest, namespace)
		if err != nil {
			where := obj.source
			if perSource[obj.source] > 1 {
				where = fmt.Sprintf("%s (object %d)", obj.source, nth[obj.source])
			}
			return fmt.Errorf("%s: %w", where, err)
		}
		c, err := writeAnswer(notes, o.streams.Out, printer, res)
		if err != nil {
			return err
		}
		code = max(code, c)
	}
	if rendered == 0 {
		return fmt.Errorf("%s: no JobSet in it", strings.Join(o.files.names(), ", "))
	}
	return exitCode(code)
}

// writeAnswer prints the answer to one create: the decisions, violations
// and verdict to notes, and the JobSet the API server would store to out,
// as YAML after the notes, or with printer alone when there is one. It
// returns 1 if the JobSet is refused.
func writeAnswer(notes, out io.Writer, printer printers.ResourcePrinter, res offline.Result) (int, error) {
	if res.Stored == nil {
		// Refused before the validating webhook: nothing to show but why.
		fmt.Fprintf(notes, "# Verdict: refused: %s\n", res.Refusal)
		return 1, nil
	}
	fmt.Fprintln(notes, "# Decisions:")
	if len(res.Injected) == 0 {
		fmt.Fprintln(notes, "#   defaults only: injection applies to restartStrategy InPlaceRestart (and not with inplace.dev/inject: \"false\")")
	}
	for _, d := range res.Injected {
		fmt.Fprintf(notes, "#   %s %s: %s\n", d.What, d.Where, d.Why)
	}
	verdict(notes, res.Policies)
	warnings, err := jobTemplateWarnings(res.Stored)
	if err != nil {
		return 1, err
	}
	for _, w := range warnings {
		fmt.Fprintf(notes, "# %-6s %s\n", "warn", w)
	}
	if res.Refusal != "" {
		fmt.Fprintf(notes, "# Verdict: refused: %s\n", res.Refusal)
		if printer != nil {
			// The API server stores nothing.
			return 1, nil
		}
	} else {
		fmt.Fprintln(notes, "# Verdict: accepted")
	}
	if printer != nil {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(res.Stored); err != nil {
			return 1, err
		}
		return 0, printer.PrintObj(u, out)
	}
	stored, err := yaml.JSONToYAML(res.Stored)
	if err != nil {
		return 1, err
	}
	fmt.Fprint(out, string(stored))
	if res.Refusal != "" {
		return 1, nil
	}
	return 0, nil
}

// namespace is where a JobSet whose manifest names none is created, as
// kubectl apply -f would create it: -n, else the kubeconfig context's
// namespace, else default. Reading a kubeconfig is local: render stays
// offline.
func (o *rootOptions) namespace() (string, error) {
	if ns := *o.configFlags.Namespace; ns != "" {
		return ns, nil
	}
	ns, _, err := o.configFlags.ToRawKubeConfigLoader().Namespace()
	switch {
	case clientcmd.IsEmptyConfig(err):
		return "default", nil
	case err != nil:
		return "", fmt.Errorf("reading the namespace from the kubeconfig: %w; give -n NAMESPACE", err)
	}
	return ns, nil
}

// noArgs refuses positional arguments, with how to give what the command
// takes instead.
func noArgs(hint string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 && hint == "" {
			return usageErrorf("%s takes no arguments, got %q", cmd.CommandPath(), args)
		}
		if len(args) > 0 {
			return usageErrorf("%s takes no arguments, got %q: %s", cmd.CommandPath(), args, hint)
		}
		return nil
	}
}

// mustMark panics if a flag annotation names a flag the command does not
// have: a bug in this package, found by any test that builds the command.
func mustMark(err error) {
	if err != nil {
		panic(err)
	}
}
