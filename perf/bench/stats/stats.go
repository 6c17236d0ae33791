package stats

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"
)

// Summary of a set of durations.
type Summary struct {
	Name  string  `json:"name"`
	N     int     `json:"n"`
	Mean  float64 `json:"meanMicros"`
	P50   float64 `json:"p50Micros"`
	P90   float64 `json:"p90Micros"`
	P99   float64 `json:"p99Micros"`
	Max   float64 `json:"maxMicros"`
	Extra string  `json:"extra,omitempty"`
}

// Summarize computes percentiles of samples.
func Summarize(name string, samples []time.Duration) Summary {
	s := Summary{Name: name, N: len(samples)}
	if len(samples) == 0 {
		return s
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	var total time.Duration
	for _, d := range sorted {
		total += d
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	at := func(q float64) float64 { return us(sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]) }
	s.Mean = us(total / time.Duration(len(sorted)))
	s.P50, s.P90, s.P99, s.Max = at(0.50), at(0.90), at(0.99), us(sorted[len(sorted)-1])
	return s
}

// Table prints summaries.
func Table(w io.Writer, rows []Summary) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "measure\tn\tmean µs\tp50 µs\tp90 µs\tp99 µs\tmax µs\t\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t  %s\t\n", r.Name, r.N, r.Mean, r.P50, r.P90, r.P99, r.Max, r.Extra)
	}
	tw.Flush()
}

// WriteJSON writes v as indented JSON to path, creating its directory.
func WriteJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
