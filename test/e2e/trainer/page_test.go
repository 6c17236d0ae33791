package trainer

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/docpage"
	"github.com/inplace-dev/inplace/test/kubeflowtrainer"
)

// pageNamespace is the namespace docs/how-to/kubeflow-trainer.md runs the
// TrainJob in; the suite runs each command in a namespace of its own.
const pageNamespace = "team-a"

// page is docs/how-to/kubeflow-trainer.md.
func page() string {
	GinkgoHelper()
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(filepath.Join(root, "docs", "how-to", "kubeflow-trainer.md"))
	Expect(err).NotTo(HaveOccurred())
	return string(data)
}

// What differs from run to run in the page's outputs: ages (44s, 2m5s),
// then any number (steps, pids).
var (
	age     = regexp.MustCompile(`\b[0-9]+[smhd]([0-9]+[smhd])*\b`)
	varying = regexp.MustCompile(`[0-9]+`)
)

// normalized is text with every age as AGE, every other number as N, and
// runs of spaces as one.
func normalized(text string) string {
	text = age.ReplaceAllString(text, "AGE")
	return strings.Join(strings.Fields(varying.ReplaceAllString(text, "N")), " ")
}

// runPage runs a command line of the page, as written but in namespace
// ns, checks that the page shows the command and each line of prints,
// and that the command printed each (numbers aside). It returns what the
// command printed.
func runPage(ns, command string, limit time.Duration, prints ...string) string {
	GinkgoHelper()
	p := page()
	Expect(pageShows(command)).To(BeTrue(), "docs/how-to/kubeflow-trainer.md shows the command:\n%s", command)
	line := strings.ReplaceAll(command, "-n "+pageNamespace+" ", "-n "+ns+" ")
	out, err := fw.Run(ctx, limit, nil, "sh", "-c", line)
	Expect(err).NotTo(HaveOccurred(), out)
	for _, want := range prints {
		Expect(p).To(ContainSubstring(want), "docs/how-to/kubeflow-trainer.md shows what %q prints", command)
		Expect(normalized(out)).To(ContainSubstring(normalized(want)), "%q prints what docs/how-to/kubeflow-trainer.md shows", command)
	}
	return out
}

// pageShows says whether a code block of the page holds text, read
// without the indentation of its list item.
func pageShows(text string) bool {
	GinkgoHelper()
	doc, err := docpage.Read(page())
	Expect(err).NotTo(HaveOccurred())
	for _, b := range doc.Blocks {
		if strings.Contains(b.Text, text) {
			return true
		}
	}
	return false
}

// expectPageKustomization checks that the kustomization the page shows is
// the one the suite installs, with Trainer's repository at its tag for
// the module.
func expectPageKustomization() {
	GinkgoHelper()
	doc, err := docpage.Read(page())
	Expect(err).NotTo(HaveOccurred())
	var found []string
	for _, b := range doc.Blocks {
		if b.Info == "yaml" && strings.Contains(b.Text, "kubeflow_trainer_version") {
			found = append(found, b.Text)
		}
	}
	Expect(found).To(HaveLen(1), "docs/how-to/kubeflow-trainer.md shows one kustomization")
	v := kubeflowtrainer.Module.Version
	text := strings.ReplaceAll(found[0], "https://raw.githubusercontent.com/kubeflow/trainer/"+v+"/manifests/", "module/manifests/")
	text = regexp.MustCompile(`https://github.com/kubeflow/trainer.git/(manifests/[a-z/]+)\?ref=`+regexp.QuoteMeta(v)).ReplaceAllString(text, "module/$1")
	Expect(strings.TrimSpace(text)).To(Equal(strings.TrimSpace(kubeflowtrainer.Kustomization)))
}
