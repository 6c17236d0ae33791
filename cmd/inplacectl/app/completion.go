package app

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// completionTimeout bounds the list a completion makes: a shell waiting on
// an unreachable cluster is worse than no completion.
const completionTimeout = 5 * time.Second

// completeJobSets completes status's argument with the names of the
// JobSets in the namespace, listed from the cluster.
func (o *statusOptions) completeJobSets(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return o.completeNames(cmd.Context(), &jobset.JobSetList{}, true, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// registerConfigFlagCompletions completes --namespace from the cluster and
// --context from the kubeconfig, as kubectl does.
func registerConfigFlagCompletions(cmd *cobra.Command, o *rootOptions) {
	mustMark(cmd.RegisterFlagCompletionFunc("namespace", func(c *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return o.completeNames(c.Context(), &corev1.NamespaceList{}, false, toComplete), cobra.ShellCompDirectiveNoFileComp
	}))
	mustMark(cmd.RegisterFlagCompletionFunc("context", func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		raw, err := o.configFlags.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			cobra.CompErrorln(err.Error())
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		for name := range raw.Contexts {
			if strings.HasPrefix(name, toComplete) {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		return names, cobra.ShellCompDirectiveNoFileComp
	}))
}

// completeNames lists objects of list's kind, in the namespace when
// namespaced, and returns the names that start with prefix; nothing when
// the cluster does not answer in time.
func (o *rootOptions) completeNames(ctx context.Context, list client.ObjectList, namespaced bool, prefix string) []string {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	c, ns, err := o.client()
	if err != nil {
		cobra.CompErrorln(err.Error())
		return nil
	}
	var opts []client.ListOption
	if namespaced {
		opts = append(opts, client.InNamespace(ns))
	}
	if err := c.List(ctx, list, opts...); err != nil {
		cobra.CompErrorln(err.Error())
		return nil
	}
	var names []string
	if err := apimeta.EachListItem(list, func(obj runtime.Object) error {
		if m, err := apimeta.Accessor(obj); err == nil && strings.HasPrefix(m.GetName(), prefix) {
			names = append(names, m.GetName())
		}
		return nil
	}); err != nil {
		cobra.CompErrorln(err.Error())
	}
	return names
}
