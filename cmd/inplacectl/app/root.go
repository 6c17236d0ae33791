package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// rootOptions is what every subcommand shares: the flags kubectl users
// know for choosing a cluster and a namespace (--kubeconfig, --context,
// -n/--namespace, --as, ..., cli-runtime's ConfigFlags), and the streams.
//
// A subcommand lives in a file of its own as
//
//	func newXCommand(o *rootOptions) *cobra.Command
//
// and is one row of subcommands below (migrate.go adds newMigrateCommand
// there). Its RunE returns nil for success, an error for a failure (exit
// 1), usageErrorf(...) for bad usage (exit 2), or exitCode(n) once it has
// printed a verdict itself; see Execute.
type rootOptions struct {
	configFlags *genericclioptions.ConfigFlags
	streams     genericiooptions.IOStreams
	// displayName is how a user calls the program: "inplacectl", or
	// "kubectl inplace" for the plugin. Examples and usage lines show it.
	displayName string
}

// subcommands are the root's commands, in the order help lists them.
var subcommands = []func(o *rootOptions) *cobra.Command{
	newRenderCommand,
	newPolicyCommand,
	newStatusCommand,
	newMigrateCommand,
	newVersionCommand,
}

// NewCommand returns the inplacectl command, which reads from and writes
// to streams.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	return newRootCommand(streams, "inplacectl", "")
}

func newRootCommand(streams genericiooptions.IOStreams, name, displayName string) *cobra.Command {
	o := &rootOptions{
		configFlags: genericclioptions.NewConfigFlags(true).WithWarningPrinter(streams),
		streams:     streams,
		displayName: name,
	}
	if displayName != "" {
		o.displayName = displayName
	}
	cmd := &cobra.Command{
		Use:   name,
		Short: "Answer JobSets offline as inplace's webhooks would, test policies, and show in-place restarts",
		Long: o.examples(`inplacectl runs the code of inplace's webhooks offline: it answers the
create of a JobSet as the API server with inplace's CRD and webhooks would
(render), and evaluates and tests policies (policy). With a cluster, it
shows a JobSet's in-place restarts (status).

Exit status: 0 on success; 1 when the API server would refuse a JobSet,
a policy denies, a test fails, a described policy is invalid or a command
fails; 2 on bad usage.`),
		// Execute prints errors and usage hints once, itself.
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	if displayName != "" {
		cmd.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: displayName}
		// kubectl completes `kubectl inplace` through
		// kubectl_complete-inplace (CompletionHelperName) and never loads
		// a script of the plugin's: cobra's completion command, whose
		// scripts complete a command named kubectl-inplace, is left out
		// of the plugin's help and completions. It still runs, for
		// whoever calls kubectl-inplace by that name.
		cmd.CompletionOptions.HiddenDefaultCmd = true
	}
	o.configFlags.AddFlags(cmd.PersistentFlags())
	registerConfigFlagCompletions(cmd, o)
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	cmd.SetFlagErrorFunc(flagError)
	for _, newCmd := range subcommands {
		cmd.AddCommand(newCmd(o))
	}
	classify(cmd)
	return cmd
}

// examples writes a help text or an example for the name the user calls
// the program by.
func (o *rootOptions) examples(s string) string {
	return strings.ReplaceAll(s, "inplacectl", o.displayName)
}

// errNoCluster is what a command that reads the cluster says when nothing
// names one.
var errNoCluster = errors.New("no cluster to read from: give --kubeconfig PATH, set KUBECONFIG, or write ~/.kube/config (or give --server)")

// restConfig is the configuration of the cluster the config flags name.
// With no kubeconfig, or one that names no cluster and no context, and no
// --server, --context or --cluster, client-go would dial its default, http://localhost:8080
// (cli-runtime applies clientcmd.ClusterDefaults), and the user would read
// "connection refused" where errNoCluster says what is missing. A context
// named but missing is clientcmd's to say. In a Pod
// the in-cluster configuration stands in for a kubeconfig, as for
// kubectl.
func (o *rootOptions) restConfig() (*rest.Config, error) {
	raw, err := o.configFlags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	named := raw.CurrentContext != "" || len(raw.Clusters) > 0 || len(raw.Contexts) > 0
	for _, flag := range []*string{o.configFlags.APIServer, o.configFlags.Context, o.configFlags.ClusterName} {
		named = named || ptr.Deref(flag, "") != ""
	}
	if !named && !inCluster() {
		return nil, errNoCluster
	}
	cfg, err := o.configFlags.ToRESTConfig()
	if clientcmd.IsEmptyConfig(err) {
		return nil, errNoCluster
	}
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	return cfg, nil
}

// inCluster reports whether the program runs in a Pod whose service
// account client-go would use.
func inCluster() bool {
	_, err := rest.InClusterConfig()
	return err == nil
}

// client is a client of the cluster the config flags name (restConfig),
// and the namespace: -n, else the context's. status, migrate and the
// completions from the cluster all read through it.
func (o *rootOptions) client() (client.Client, string, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, "", err
	}
	ns, _, err := o.configFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, "", err
	}
	if err := jobset.AddToScheme(scheme); err != nil {
		return nil, "", err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, "", err
	}
	return c, ns, nil
}

// groupRunE runs a command below the root that only groups others: alone
// it prints its help; with an argument, that argument is a command it does
// not know. (Cobra says so itself for the root's commands only.)
func groupRunE(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default for the root
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t") + "\n"
	}
	return usageErrorf("%s", msg)
}

// exitError ends the program with code, after err's message if err is
// not nil.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageErrorf is bad usage: exit 2, with a hint to the command's help.
func usageErrorf(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

// exitCode ends the program with code and no further message: the command
// has printed its verdict. exitCode(0) is nil.
func exitCode(code int) error {
	if code == 0 {
		return nil
	}
	return &exitError{code: code}
}

// classify makes every error a command's run returns a failure (exit 1)
// unless it says otherwise, and every error of its argument check bad usage
// (exit 2). Whatever else cobra returns — a flag, a required flag, a
// command it does not know — is bad usage too. It runs once the tree is
// built, so that a subcommand added to subcommands needs nothing more.
func classify(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		classify(c)
	}
	if run := cmd.RunE; run != nil {
		cmd.RunE = func(c *cobra.Command, args []string) error {
			err := run(c, args)
			var e *exitError
			if err == nil || errors.As(err, &e) {
				return err
			}
			return &exitError{code: 1, err: err}
		}
	}
	if check := cmd.Args; check != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if err := check(c, args); err != nil {
				var e *exitError
				if errors.As(err, &e) {
					return err
				}
				return &exitError{code: 2, err: err}
			}
			return nil
		}
	}
}

// flagError names the flag, and says so when a long flag was given with
// one dash as inplacectl's flags once were (-kubeconfig is -k -u -b ...).
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if _, arg, ok := strings.Cut(msg, " in -"); ok && strings.HasPrefix(msg, "unknown shorthand flag") {
		name, _, _ := strings.Cut(arg, "=")
		if cmd.Flags().Lookup(name) != nil {
			msg += fmt.Sprintf(": long flags take two dashes: --%s", name)
		}
	}
	return usageErrorf("%s", msg)
}

// Execute runs cmd with args (without the program name) and returns the
// exit status: 0, 1 for a refusal or a failure, 2 for bad usage. It prints
// the error, if any, to cmd's error stream.
func Execute(ctx context.Context, cmd *cobra.Command, args []string) int {
	cmd.SetArgs(args)
	c, err := cmd.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	errOut := cmd.ErrOrStderr()
	code := 2
	var e *exitError
	if errors.As(err, &e) {
		code = e.code
		err = e.err
	}
	if err != nil {
		fmt.Fprintf(errOut, "error: %v\n", err)
	}
	if code == 2 {
		fmt.Fprintf(errOut, "See '%s --help' for usage.\n", c.CommandPath())
	}
	return code
}

// Run runs inplacectl with args (without the program name), reading
// standard input, and returns the exit status.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return Execute(ctx, NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: stdout, ErrOut: stderr}), args)
}
