package kueue

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/images"
	kueueinstall "github.com/inplace-dev/inplace/test/kueue"
)

const (
	// jobSetSpecs is how many specs Kueue's suite labels feature:jobset
	// at the version hack/kueue pins.
	jobSetSpecs = 2
	// suiteTimeout bounds Kueue's specs; they wait up to LongTimeout (45
	// s) for what they expect.
	suiteTimeout = 10 * time.Minute
)

// summary is the end of a ginkgo run's report: what ran, and the counts.
var summary = regexp.MustCompile(`(?m)^Ran \d+ of \d+ Specs in .*$|^(SUCCESS|FAIL)! -- .*$`)

// One ordered container: Kueue's configuration is cluster-wide, and the
// specs that need waitForPodsReady run last, once Kueue restarted with it.
var _ = Describe("Kueue "+kueueinstall.Module.Version+", built from its module, in front of inplace", Ordered, ContinueOnFailure, func() {
	It("passes its own JobSet end-to-end specs", passesKueueJobSetSpecs)
	It("preempts a low-priority InPlaceRestart JobSet for a high-priority one without counting a restart, resumes it with its pod set assignment, restarts it in place, and completes both", preemptsAndResumes)
	It("leaves a JobSet that MultiKueue manages to MultiKueue", leavesMultiKueueJobSets)
	It("places every Pod in the topology domain Kueue assigned, before and after an in-place restart", keepsTopologyAssignment)
	Context("with waitForPodsReady and a recoveryTimeout", func() {
		BeforeAll(restartKueueWithWaitForPodsReady)
		It("never evicts a JobSet for an in-place restart, in container or process scope", survivesRecoveryTimeout)
		It("evicts a JobSet whose Pod stays unready past the recoveryTimeout, cleanly, and admits it again", evictsUnreadyJobSet)
	})
})

// passesKueueJobSetSpecs runs Kueue's own specs labelled feature:jobset,
// built from its module, unmodified, against inplace.
func passesKueueJobSetSpecs() {
	bin, err := cluster.BinDir()
	Expect(err).NotTo(HaveOccurred())
	suite := filepath.Join(bin, "kueue-e2e-extended.test")
	Expect(suite).To(BeAnExistingFile(), "Kueue's suite is built by 'make cluster-binaries'")
	// Its JUnit report goes to ARTIFACTS, the repository's root else.
	env := []string{"E2E_TEST_AGNHOST_IMAGE=" + images.AgnhostImage, "ARTIFACTS=" + GinkgoT().TempDir()}
	out, err := fw.Run(ctx, suiteTimeout+time.Minute, env, suite, "-test.v", "-test.timeout="+suiteTimeout.String(),
		"-ginkgo.no-color", "-ginkgo.timeout="+suiteTimeout.String(), "-ginkgo.label-filter=feature:jobset")
	report := summary.FindAllString(out, -1)
	fmt.Printf("Kueue's JobSet end-to-end specs:\n  %s\n", strings.Join(report, "\n  "))
	Expect(err).NotTo(HaveOccurred(), "Kueue's specs failed:\n%s", out)
	Expect(report).To(ContainElement(MatchRegexp(`^Ran %d of \d+ Specs in `, jobSetSpecs)), "every JobSet spec ran:\n%s", out)
	Expect(report).To(ContainElement(MatchRegexp(`^SUCCESS! -- %d Passed \| 0 Failed \| 0 Pending \| \d+ Skipped`, jobSetSpecs)), "every JobSet spec passed:\n%s", out)
}
