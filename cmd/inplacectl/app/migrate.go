package app

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/inplace-dev/inplace/cmd/inplacectl/migration"
	"github.com/inplace-dev/inplace/controller/coexist"
)

type migrateOptions struct {
	*rootOptions
	upstreamNamespace, inplaceNamespace string
}

func newMigrateCommand(root *rootOptions) *cobra.Command {
	o := &migrateOptions{rootOptions: root}
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "List what blocks moving the cluster from upstream JobSet to inplace, and what is done",
		Long: root.examples(`Check the migration from upstream JobSet (kubernetes-sigs/jobset) to
inplace, step by step as docs/how-to/migrate-from-jobset.md takes them: upstream's
controller stopped (its Deployment at 0 replicas, its Lease lapsed), its
webhook configurations deleted, the JobSet CRD inplace's, inplace installed
and ready. Each line says BLOCKS, with the command that clears it, or done.

Warnings name the JobSets that change when inplace takes them over: fields
inplace's CRD does not have, a restart under way,
Jobs inplace would recreate, in-place restarts upstream made, which
inplace counts towards maxRestarts. They block nothing.

Reads the cluster that --kubeconfig and --context name; writes nothing.
Exit status: 0 when nothing blocks, 1 while anything does.`),
		Example: root.examples(`  # Before, during and after the migration
  inplacectl migrate

  # Upstream installed by its Helm chart in another namespace
  inplacectl migrate --upstream-namespace jobset`),
		Args: noArgs(""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.upstreamNamespace, "upstream-namespace", coexist.UpstreamNamespace, "the namespace upstream JobSet runs in (the manager's controller.upstreamJobSet.namespace)")
	f.StringVar(&o.inplaceNamespace, "inplace-namespace", "inplace-system", "the namespace inplace runs in")
	return cmd
}

func (o *migrateOptions) run(ctx context.Context) error {
	c, _, err := o.client()
	if err != nil {
		return err
	}
	in, err := migration.Gather(ctx, c, migration.Options{UpstreamNamespace: o.upstreamNamespace, Namespace: o.inplaceNamespace})
	if err != nil {
		return err
	}
	findings := migration.Check(in)
	if err := migration.Write(o.streams.Out, findings); err != nil {
		return err
	}
	if migration.Blocked(findings) > 0 {
		return exitCode(1)
	}
	return nil
}
