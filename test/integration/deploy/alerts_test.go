package deploy

import (
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
	objs, err := testdeploy.Objects("config/prometheus/policy-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
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
	metric := regexp.MustCompile(`inplace_[a-z_]+`)
	alerts := 0
	for _, u := range objs {
		groups, _, _ := unstructuredSlice(u.Object, "spec", "groups")
		for _, g := range groups {
			rules, _ := g.(map[string]any)["rules"].([]any)
			for _, r := range rules {
				rule := r.(map[string]any)
				expr, _ := rule["expr"].(string)
				alerts++
				for _, name := range metric.FindAllString(expr, -1) {
					base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")
					if !strings.Contains(sources.String(), `"`+base+`"`) {
						t.Errorf("alert %s reads %s, which no code registers", rule["alert"], name)
					}
				}
			}
		}
	}
	if alerts < 5 {
		t.Errorf("%d alerts, want the policy alerts (errors, timeouts, slow, compile errors, audit, inventory)", alerts)
	}
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
