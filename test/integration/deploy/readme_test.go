package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/inplace-dev/inplace/test/cluster"
)

// leaves flattens values into dotted keys and their defaults as the
// README writes them; an empty map or list is a leaf.
func leaves(prefix string, v any, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		if len(v) > 0 {
			for k, c := range v {
				leaves(strings.TrimPrefix(prefix+"."+k, "."), c, out)
			}
			return
		}
		out[prefix] = "{}"
	case []any:
		if len(v) > 0 {
			out[prefix] = fmt.Sprint(v)
			return
		}
		out[prefix] = "[]"
	case string:
		out[prefix] = v
		if v == "" {
			out[prefix] = `""` // as values.yaml writes it
		}
	case float64: // sigs.k8s.io/yaml's numbers
		out[prefix] = strconv.FormatFloat(v, 'f', -1, 64)
	default:
		out[prefix] = fmt.Sprint(v)
	}
}

// valuesRow is a row of the README's table of values: | `key` | `default` | meaning |.
var valuesRow = regexp.MustCompile("(?m)^\\| `([^`]+)` \\| `([^`]*)` \\|")

var _ = Describe("the chart's README", func() {
	It("names every value of values.yaml with its default, and no other", func() {
		root, err := cluster.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		data, err := os.ReadFile(filepath.Join(root, "charts/inplace/values.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var values map[string]any
		Expect(yaml.Unmarshal(data, &values)).To(Succeed())
		want := map[string]string{}
		leaves("", values, want)
		Expect(want).To(HaveKey("manager.replicas"), "values.yaml parsed")

		readme, err := os.ReadFile(filepath.Join(root, "charts/inplace/README.md"))
		Expect(err).NotTo(HaveOccurred())
		got := map[string]string{}
		for _, m := range valuesRow.FindAllStringSubmatch(string(readme), -1) {
			got[m[1]] = m[2]
		}
		var missing []string
		for k, v := range want {
			if d, ok := got[k]; !ok || d != v {
				missing = append(missing, fmt.Sprintf("%s (default %s)", k, v))
			}
		}
		sort.Strings(missing)
		Expect(missing).To(BeEmpty(), "values of values.yaml that the README's table does not name with their default")
		for k := range got {
			Expect(want).To(HaveKey(k), "the README's table names %s, which values.yaml does not have", k)
		}
	})
})
