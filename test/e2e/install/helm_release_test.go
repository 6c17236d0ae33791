package install

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The commands of docs/how-to/release.md that install a release with
// Helm or without a registry, with %[1]s for the chart's version and %[2]s
// for the release's: the docs name the tree's, the specs run their own.
const (
	helmPushRelease    = "helm push dist/inplace-%[1]s.tgz oci://registry.example.com/charts"
	helmInstallRelease = "helm install inplace dist/inplace-%[1]s.tgz -n inplace-system --create-namespace"
	ctrImportManager   = "ctr -n k8s.io images import dist/inplace-manager-%[2]s.tar"
	ctrImportAgent     = "ctr -n k8s.io images import dist/inplace-agent-%[2]s.tar"
	ctrListImages      = "ctr -n k8s.io images ls -q | grep inplace-"
)

// releaseCommand is one of the commands above for version.
func releaseCommand(command, version string) string {
	return fmt.Sprintf(command, strings.TrimPrefix(version, "v"), version)
}

// installsTheReleaseWithHelm pushes the release's chart to the cluster's
// registry, installs it from the archive with its images pulled from that
// registry, runs a JobSet in place on it and uninstalls it, as release.md
// says; then imports the release's image archives into each real node's
// containerd, as release.md says for a cluster without a registry.
func installsTheReleaseWithHelm(current releaseFiles) {
	GinkgoHelper()
	registry := fw.Cluster.Registry
	onRegistry := func(command string) string {
		return strings.ReplaceAll(inRelease(releaseCommand(command, releaseVersion), current), "registry.example.com", registry)
	}
	chart := strings.TrimPrefix(releaseVersion, "v")
	// The cluster's registry speaks plain HTTP on loopback.
	Expect(sh(onRegistry(helmPushRelease) + " --plain-http")).To(ContainSubstring("Pushed: " + registry + "/charts/inplace:" + chart))
	Expect(sh(fmt.Sprintf("helm show chart oci://%s/charts/inplace --version %s --plain-http", registry, chart))).To(ContainSubstring("appVersion: "+releaseVersion), "the chart pushed is the release's")

	Expect(sh(onRegistry(helmInstallRelease) + " --set imageRegistry=" + registry + "/ml")).To(ContainSubstring(docOutputs[helmInstall][0]))
	shDoc(labelNamespace, "")
	expectWebhooksPointAtTheService()
	issueAsCertManager()
	shDoc(rolloutStatus, " --timeout=3m")
	shDoc(rolloutWebhook, " --timeout=3m")
	manager := registry + "/ml/inplace-manager:" + releaseVersion
	expectDeploymentsRun(manager)
	runsAJobSetInPlace("helm-release", false, registry+"/ml/inplace-agent:"+releaseVersion)
	shDoc(helmUninstall, " --wait")
	Expect(k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(Succeed())
	expectUninstalled()

	// Without a registry: release.md imports the archives into every
	// node's containerd, and lists them there.
	for _, socket := range fw.Cluster.ContainerdSockets() {
		ctr := "ctr --address " + socket + " "
		for _, command := range []string{ctrImportManager, ctrImportAgent} {
			sh(strings.Replace(inRelease(releaseCommand(command, releaseVersion), current), "ctr ", ctr, 1))
		}
		images := sh(strings.Replace(ctrListImages, "ctr ", ctr, 1))
		for _, image := range []string{"inplace-manager", "inplace-agent"} {
			Expect(images).To(ContainSubstring("ghcr.io/inplace-dev/"+image+":"+releaseVersion), "the node's containerd holds the imported image")
		}
	}
}
