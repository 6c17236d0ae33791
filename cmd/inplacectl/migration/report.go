package migration

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Write prints the findings, one a line, and what they add up to.
func Write(w io.Writer, fs []Finding) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range fs {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Severity, f.Step, f.Message)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var err error
	if n := Blocked(fs); n > 0 {
		_, err = fmt.Fprintf(w, "\n%d finding(s) block the migration from upstream JobSet; docs/how-to/migrate-from-jobset.md says how to clear each.\n", n)
	} else {
		_, err = fmt.Fprintln(w, "\nNothing blocks: inplace runs the JobSets, and upstream JobSet's controller, webhooks and CRD are gone.")
	}
	return err
}
