package webhook

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	"github.com/inplace-dev/inplace/policies"
	"github.com/inplace-dev/inplace/webhook/offline"
)

// noImage is the case of a container without an image.
const noImage = "a container without an image"

// renderCases are manifests the offline admission must answer as the API
// server does: every JobSet the repository ships, and one refused at each
// step of the API server's create.
func renderCases() map[string][]byte {
	GinkgoHelper()
	cases := map[string][]byte{}
	for _, pattern := range []string{"../../../examples/*/*.yaml", "../../testdata/specs/*.yaml", "../../../webhook/inject/testdata/*.yaml"} {
		files, err := filepath.Glob(pattern)
		Expect(err).NotTo(HaveOccurred())
		for _, f := range files {
			data, err := os.ReadFile(f)
			Expect(err).NotTo(HaveOccurred())
			if strings.Contains(string(data), "\nkind: JobSet\n") && !strings.Contains(string(data), "\n---") {
				cases[f] = data
			}
		}
	}
	Expect(len(cases)).To(BeNumerically(">=", 10), "the shipped JobSets")

	const base = `apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: render-case
spec:
%s  replicatedJobs:
  - name: workers
%s    template:
      spec:
        template:
          spec:
            containers: [{name: trainer, image: busybox}]
`
	add := func(name, spec, replicatedJob string) {
		cases[name] = []byte(strings.Replace(strings.Replace(base, "%s", spec, 1), "%s", replicatedJob, 1))
	}
	add("an unknown field", "  bogus: 1\n", "")
	add("a schema minimum", "  failurePolicy: {maxRestarts: -3}\n", "")
	add("a schema enum", "  failurePolicy: {restartStrategy: Sometimes}\n", "")
	add("a CEL rule", "  startupPolicy: {startupPolicyOrder: InOrder}\n", "    dependsOn: [{name: workers, status: Ready}]\n")
	add("a built-in policy", "  failurePolicy:\n    restartStrategy: InPlaceRestart\n", "    replicas: 2\n")
	add("an in-place restart", "  failurePolicy:\n    restartStrategy: InPlaceRestart\n    maxRestarts: 3\n", "")
	cases["an invalid name"] = []byte(strings.Replace(string(cases["an in-place restart"]), "name: render-case", "name: Render_Case", 1))
	// Stored, as upstream JobSet stores it; its Jobs are refused later,
	// which render warns of.
	cases[noImage] = []byte(strings.Replace(string(cases["an in-place restart"]), ", image: busybox", "", 1))
	return cases
}

var _ = Describe("inplacectl render", func() {
	It("answers every create as the API server does, with the same text, and stores the same JobSet", func() {
		ns := fw.NewNamespace(ctx, k8sClient)
		conf, err := configv1alpha1.Load("")
		Expect(err).NotTo(HaveOccurred())
		fw.Configure(conf)
		engine, err := policies.NewEngine(conf.Policies.DisabledBuiltins)
		Expect(err).NotTo(HaveOccurred())
		admitter, err := offline.NewAdmitter(conf.Agent, engine)
		Expect(err).NotTo(HaveOccurred())

		refused := 0
		for name, manifest := range renderCases() {
			By(name)
			res, err := admitter.Create(ctx, manifest, ns.Name)
			Expect(err).NotTo(HaveOccurred(), name)

			u := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal(manifest, &u.Object)).To(Succeed(), name)
			u.SetNamespace(ns.Name)
			// kubectl's default: unknown fields are refused.
			err = k8sClient.Create(ctx, u, client.DryRunAll, client.FieldValidation("Strict"))
			if strings.HasSuffix(name, ".yaml") && !strings.Contains(name, "opt-out") && !strings.Contains(name, "no-command") {
				// Every JobSet the repository ships is one a user may apply
				// as it is, but the one that opts out of injection (and
				// lacks what it would inject) and the process-scope one
				// with a worker without a command, which show a refusal.
				Expect(err).NotTo(HaveOccurred(), "%s: a shipped JobSet is refused", name)
			}
			if name == noImage {
				Expect(err).NotTo(HaveOccurred(), "the API server stores a JobSet whose container has no image")
			}
			if err != nil {
				refused++
				Expect(res.Refusal).To(Equal(err.Error()), "%s: render's verdict against the API server's", name)
				continue
			}
			Expect(res.Refusal).To(BeEmpty(), "%s: the API server accepts it", name)
			rendered := &unstructured.Unstructured{}
			Expect(rendered.UnmarshalJSON(res.Stored)).To(Succeed())
			Expect(json.Marshal(rendered.Object["spec"])).To(MatchJSON(must(json.Marshal(u.Object["spec"]))), "%s: the spec stored", name)
			Expect(rendered.GetAnnotations()).To(Equal(u.GetAnnotations()), "%s: the annotations stored", name)
			Expect(rendered.GetLabels()).To(Equal(u.GetLabels()), "%s: the labels stored", name)
		}
		Expect(refused).To(BeNumerically(">=", 6), "the cases refused at each step")
	})
})

func must[T any](v T, err error) T {
	GinkgoHelper()
	Expect(err).NotTo(HaveOccurred())
	return v
}
