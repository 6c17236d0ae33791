package app

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
)

type statusOptions struct {
	*rootOptions
	output         string
	agentContainer string
}

// statusFormats are the values of status's --output; the default is the
// table.
var statusFormats = []string{"wide", "json", "yaml"}

func newStatusCommand(root *rootOptions) *cobra.Command {
	o := &statusOptions{rootOptions: root}
	cmd := &cobra.Command{
		Use:   "status JOBSET",
		Short: "Show a JobSet's epochs, barriers, Pods and last in-place restart",
		Long: root.examples(`Show a JobSet's restarts and, for restartStrategy InPlaceRestart, its
epochs, the barrier of every replicated job, its Pods' epochs and workers'
restarts, and the timeline of its last in-place restart, from the cluster
that --kubeconfig and --context name, in -n or the context's namespace.

-o wide adds the replicated jobs' replicas and the Pods' replicated job,
node and phase; -o json and -o yaml print the same report for scripts
(every Pod, where the table shows the first 50).`),
		Example: root.examples(`  # In the current context's namespace
  inplacectl status train

  # Elsewhere, as JSON
  inplacectl status train -n ml --context prod -o json`),
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("name one JobSet: %s JOBSET [-n NAMESPACE], got %d arguments", cmd.CommandPath(), len(args))
			}
			return nil
		},
		ValidArgsFunction: o.completeJobSets,
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), args[0])
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.output, "output", "o", "", "wide, json or yaml; default: the table")
	f.StringVar(&o.agentContainer, "agent-container", "inplace-agent", "the name of the injected agent container (the manager's agent.containerName)")
	mustMark(cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(statusFormats, cobra.ShellCompDirectiveNoFileComp)))
	return cmd
}

func (o *statusOptions) run(ctx context.Context, name string) error {
	if o.output != "" && !slices.Contains(statusFormats, o.output) {
		return usageErrorf("--output %q: use wide, json or yaml, or leave it out for the table", o.output)
	}
	c, ns, err := o.client()
	if err != nil {
		return err
	}
	in, err := readStatus(ctx, c, ns, name)
	if err != nil {
		return err
	}
	in.agentContainer = o.agentContainer
	r := buildStatusReport(in)
	switch o.output {
	case "json":
		data, err := json.MarshalIndent(r, "", "    ")
		if err != nil {
			return err
		}
		fmt.Fprintln(o.streams.Out, string(data))
	case "yaml":
		data, err := yaml.Marshal(r)
		if err != nil {
			return err
		}
		fmt.Fprint(o.streams.Out, string(data))
	default:
		writeStatusTable(o.streams.Out, r, o.output == "wide")
	}
	return nil
}

func readStatus(ctx context.Context, c client.Client, namespace, name string) (statusInputs, error) {
	var in statusInputs
	js := &jobset.JobSet{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, js); err != nil {
		if apierrors.IsNotFound(err) {
			return in, fmt.Errorf("JobSet %s/%s not found", namespace, name)
		}
		return in, err
	}
	in.jobSet = js
	var cm corev1.ConfigMap
	switch err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: protocol.BroadcastName(name)}, &cm); {
	case err == nil:
		b, err := protocol.DecodeBroadcast(cm.Data)
		if err != nil {
			return in, fmt.Errorf("the broadcast ConfigMap %s: %w", cm.Name, err)
		}
		in.broadcast = &b
	case !apierrors.IsNotFound(err):
		return in, err
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{jobset.JobSetNameKey: name}); err != nil {
		return in, err
	}
	in.pods = pods.Items
	var events corev1.EventList
	if err := c.List(ctx, &events, client.InNamespace(namespace),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("involvedObject.uid", string(js.UID))}); err != nil {
		return in, err
	}
	in.events = events.Items
	return in, nil
}
