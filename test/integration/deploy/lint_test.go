package deploy

import (
	"fmt"
	"os/exec"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/inplace-dev/inplace/test/cluster"
)

// helm runs helm in the repository's root; its error holds stdout and
// stderr both, since helm lint reports on stdout.
func helm(args ...string) error {
	GinkgoHelper()
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(tool("HELM", "helm"), args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("helm %v: %w: %s", args, err, out)
	}
	return nil
}

var _ = Describe("the chart", func() {
	It("passes helm lint, strict too", func() {
		Expect(helm("lint", "charts/inplace")).To(Succeed())
		Expect(helm("lint", "--strict", "charts/inplace")).To(Succeed())
	})

	It("passes helm lint once packaged, as a user gets it", func() {
		dir := GinkgoT().TempDir()
		Expect(helm("package", "charts/inplace", "--destination", dir)).To(Succeed())
		archives, err := filepath.Glob(filepath.Join(dir, "inplace-*.tgz"))
		Expect(err).NotTo(HaveOccurred())
		Expect(archives).To(HaveLen(1))
		Expect(helm("lint", "--strict", archives[0])).To(Succeed())
	})

	DescribeTable("refuses values its schema does not know, naming them",
		func(set string, want ...string) {
			_, err := helmTemplate("--set", set)
			Expect(err).To(MatchError(ContainSubstring("values don't meet the specifications of the schema")), "helm template")
			for _, w := range want {
				Expect(err).To(MatchError(ContainSubstring(w)), "helm template")
			}
			err = helm("lint", "charts/inplace", "--set", set)
			Expect(err).To(HaveOccurred(), "helm lint")
			for _, w := range want {
				Expect(err).To(MatchError(ContainSubstring(w)), "helm lint")
			}
		},
		Entry("a typo", "manager.replica=3", "at '/manager'", "'replica' not allowed"),
		Entry("a wrong type", "manager.replicas=two", "at '/manager/replicas'", "want integer"),
		Entry("a typo at the top level", "nodeSelecter.pool=system", "'nodeSelecter' not allowed"),
		Entry("a typo in an object", "certManager.enable=false", "at '/certManager'", "'enable' not allowed"),
		Entry("a typo in the resources", "manager.resources.limit.cpu=1", "at '/manager/resources'", "'limit' not allowed"),
		Entry("imagePullSecrets as strings", "imagePullSecrets={regcred}", "at '/imagePullSecrets/0'", "want object"),
		Entry("a PriorityClass to create without a name", "manager.priorityClass.name=", "at '/manager/priorityClass/name'"),
	)

	It("accepts the global values Helm gives a chart that is a dependency of another", func() {
		objs, err := helmTemplate("--set", "global.imageRegistry=registry.example")
		Expect(err).NotTo(HaveOccurred())
		Expect(objs).NotTo(BeEmpty())
	})

	It("leaves config open: it is the manager's configuration file, merged as is", func() {
		objs, err := helmTemplate("--set", "config.policies.auditInterval=5m")
		Expect(err).NotTo(HaveOccurred())
		Expect(objs).NotTo(BeEmpty())
	})
})
