package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/inplace-dev/inplace/perf/bench/stats"
	"github.com/inplace-dev/inplace/test/cluster"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-sizing:", err)
		os.Exit(1)
	}
}

// run measures every row, prints the table and writes the JSON, also of
// the rows measured before an error; its directory (the binary, the
// service accounts' kubeconfigs) goes in every case.
func run() error {
	rows := flag.String("rows", "10x8x0,50x20x10,100x20x100", "comma-separated rows JxPxK: J JobSets of P Pods each (InPlaceRestart, the agent injected), and K admin policies")
	out := flag.String("out", ".local/bench/sizing.json", "JSON results")
	timeout := flag.Duration("timeout", 10*time.Minute, "bound on each phase of a row")
	flag.Parse()
	// client-go's and controller-runtime's logs would drown the table.
	klog.SetLogger(logr.Discard())
	ctrllog.SetLogger(logr.Discard())
	var sizes []size
	for _, r := range strings.Split(*rows, ",") {
		s, err := parseSize(strings.TrimSpace(r))
		if err != nil {
			return fmt.Errorf("-rows: %w", err)
		}
		sizes = append(sizes, s)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := cluster.RepoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "inplace-sizing-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := buildManager(ctx, root, dir)
	if err != nil {
		return err
	}
	var results []result
	for _, s := range sizes {
		fmt.Fprintf(os.Stderr, "%s: measuring\n", s)
		r, err := measure(ctx, bin, dir, s, *timeout, os.Stderr)
		if err != nil {
			table(os.Stdout, results)
			return errors.Join(fmt.Errorf("%s: %w", s, err), stats.WriteJSON(*out, results))
		}
		results = append(results, r)
	}
	table(os.Stdout, results)
	if err := stats.WriteJSON(*out, results); err != nil {
		return err
	}
	fmt.Println("\nresults in", *out)
	return nil
}

// size is one row: jobSets JobSets of pods Pods each, and policies admin
// policies.
type size struct {
	JobSets  int `json:"jobSets"`
	Pods     int `json:"podsPerJobSet"`
	Policies int `json:"policies"`
}

func (s size) String() string {
	return fmt.Sprintf("%d JobSets x %d Pods, %d policies", s.JobSets, s.Pods, s.Policies)
}

func parseSize(s string) (size, error) {
	parts := strings.Split(s, "x")
	if len(parts) != 3 {
		return size{}, fmt.Errorf("%q is not JxPxK (JobSets x Pods per JobSet x policies), e.g. 50x20x10", s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || (i < 2 && v == 0) {
			return size{}, fmt.Errorf("%q: %q is not a positive number", s, p)
		}
		n[i] = v
	}
	return size{JobSets: n[0], Pods: n[1], Policies: n[2]}, nil
}

func table(w io.Writer, results []result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "JobSets\tPods\tpolicies\tcontroller peak memory\tcontroller CPU: start\trestart\tall\twebhook peak memory\tits evaluators\twebhook CPU: admission\tper audit period\tall\taudit took\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%.1fs\t%.1fs\t%.1fs\t%s\t%s\t%.1fs\t%.1fs\t%.1fs\t%.2fs\t\n",
			r.JobSets, r.JobSets*r.Pods, r.Policies,
			mib(r.Controller.PeakRSS), r.Controller.Start, r.Controller.Restart, r.Controller.CPUSeconds,
			mib(r.Webhook.PeakRSS), mib(r.Webhook.ChildrenPeakRSS), r.Webhook.Admission, r.Webhook.Audit, r.Webhook.CPUSeconds, r.AuditSeconds)
	}
	tw.Flush()
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
