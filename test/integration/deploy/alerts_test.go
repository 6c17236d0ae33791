package deploy

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/inplace-dev/inplace/test/cluster"
	testdeploy "github.com/inplace-dev/inplace/test/deploy"
)

// TestAlertsReadMetricsTheCodeExports checks that every metric an alert of
// config/prometheus reads is one the code registers: an alert on a metric
// renamed or never exported is silent forever.
func TestAlertsReadMetricsTheCodeExports(t *testing.T) {
	objs, err := testdeploy.Objects("config/prometheus/policy-alerts.yaml", "config/prometheus/restart-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	registered := registeredMetrics(t)
	alerts := 0
	for _, u := range objs {
		groups, _, _ := unstructuredSlice(u.Object, "spec", "groups")
		for _, g := range groups {
			rules, _ := g.(map[string]any)["rules"].([]any)
			for _, r := range rules {
				rule := r.(map[string]any)
				expr, _ := rule["expr"].(string)
				alerts++
				for _, name := range unregistered(expr, registered) {
					t.Errorf("alert %s reads %s, which no code registers", rule["alert"], name)
				}
			}
		}
	}
	if alerts < 10 {
		t.Errorf("%d alerts, want the policy alerts (errors, timeouts, slow, compile errors, audit, inventory) and the restart and admission ones (loops, fallbacks, slow restarts, webhook errors and latency)", alerts)
	}
}

// TestDashboardIsValidAndReadsMetricsTheCodeExports checks the Grafana
// dashboard of config/grafana: well-formed, every panel with a query,
// every query on a metric the code registers.
func TestDashboardIsValidAndReadsMetricsTheCodeExports(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "config/grafana/inplace-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID, Title    string
		SchemaVersion int `json:"schemaVersion"`
		Panels        []struct {
			ID      int
			Title   string
			Type    string
			GridPos struct{ W, H int } `json:"gridPos"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	if dash.UID == "" || dash.Title == "" || dash.SchemaVersion == 0 || len(dash.Panels) == 0 {
		t.Fatalf("dashboard uid %q, title %q, schemaVersion %d, %d panels: want all set", dash.UID, dash.Title, dash.SchemaVersion, len(dash.Panels))
	}
	registered := registeredMetrics(t)
	ids := map[int]bool{}
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Title == "" || p.Type == "" || p.GridPos.W == 0 || p.GridPos.H == 0 || len(p.Targets) == 0 {
			t.Errorf("panel %d %q: want a title, a type, a size and a query", p.ID, p.Title)
		}
		for _, q := range p.Targets {
			if q.RefID == "" || q.Expr == "" {
				t.Errorf("panel %q: a query without refId or expr", p.Title)
			}
			for _, name := range unregistered(q.Expr, registered) {
				t.Errorf("panel %q reads %s, which no code registers", p.Title, name)
			}
		}
	}
}

// registeredMetrics is the source of the product's packages, where every
// metric name it registers appears quoted.
func registeredMetrics(t *testing.T) string {
	t.Helper()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var sources strings.Builder
	for _, dir := range []string{"policies", "webhook", "controller", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			sources.Write(src)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return sources.String()
}

var metricName = regexp.MustCompile(`inplace_[a-z_]+`)

// unregistered returns the metrics expr reads that sources do not name.
func unregistered(expr, sources string) []string {
	var out []string
	for _, name := range metricName.FindAllString(expr, -1) {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")
		if !strings.Contains(sources, `"`+base+`"`) {
			out = append(out, name)
		}
	}
	return out
}

func unstructuredSlice(obj map[string]any, fields ...string) ([]any, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		cur = m[f]
	}
	s, ok := cur.([]any)
	return s, ok, nil
}
