package deploy

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// podSpec is the Pod template's spec of the Deployment named name.
func podSpec(objs []*unstructured.Unstructured, name string) map[string]any {
	GinkgoHelper()
	for _, u := range objs {
		if u.GetKind() == "Deployment" && u.GetName() == name {
			spec, found, err := unstructured.NestedMap(u.Object, "spec", "template", "spec")
			Expect(err).NotTo(HaveOccurred())
			Expect(found).To(BeTrue(), "Deployment %s has no Pod spec", name)
			return spec
		}
	}
	Fail("no Deployment " + name)
	return nil
}

var deployments = []string{"inplace-manager", "inplace-webhook"}

var _ = Describe("the chart's scheduling values", func() {
	It("render nothing with their defaults", func() {
		objs, err := helmTemplate()
		Expect(err).NotTo(HaveOccurred())
		for _, name := range deployments {
			spec := podSpec(objs, name)
			Expect(spec).NotTo(HaveKey("imagePullSecrets"), name)
			Expect(spec).NotTo(HaveKey("nodeSelector"), name)
			Expect(spec).NotTo(HaveKey("tolerations"), name)
			Expect(spec).To(HaveKeyWithValue("affinity", HaveLen(1)), "%s: the chart's podAntiAffinity only", name)
		}
	})

	It("put imagePullSecrets, nodeSelector, tolerations and affinity on both Deployments, which the apiserver accepts", func() {
		objs, err := helmTemplate("--set", "imagePullSecrets[0].name=regcred",
			"--set", "nodeSelector.pool=system",
			"--set", "tolerations[0].key=dedicated,tolerations[0].operator=Equal,tolerations[0].value=system,tolerations[0].effect=NoSchedule",
			"--set", "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=pool",
			"--set", "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists")
		Expect(err).NotTo(HaveOccurred())
		for _, name := range deployments {
			spec := podSpec(objs, name)
			Expect(spec).To(HaveKeyWithValue("imagePullSecrets", ConsistOf(map[string]any{"name": "regcred"})), name)
			Expect(spec).To(HaveKeyWithValue("nodeSelector", map[string]any{"pool": "system"}), name)
			Expect(spec).To(HaveKeyWithValue("tolerations", ConsistOf(map[string]any{
				"key": "dedicated", "operator": "Equal", "value": "system", "effect": "NoSchedule",
			})), name)
			Expect(spec).To(HaveKeyWithValue("affinity", And(HaveKey("nodeAffinity"), HaveKey("podAntiAffinity"))),
				"%s: affinity adds to the chart's podAntiAffinity", name)
		}
		dryRun(objs)
	})

	It("let affinity.podAntiAffinity replace the chart's", func() {
		objs, err := helmTemplate("--set", "affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey=topology.kubernetes.io/zone",
			"--set", "affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchLabels.app=x")
		Expect(err).NotTo(HaveOccurred())
		for _, name := range deployments {
			anti, _, err := unstructured.NestedMap(podSpec(objs, name), "affinity", "podAntiAffinity")
			Expect(err).NotTo(HaveOccurred())
			Expect(anti).To(HaveKey("requiredDuringSchedulingIgnoredDuringExecution"), name)
			Expect(anti).NotTo(HaveKey("preferredDuringSchedulingIgnoredDuringExecution"), name)
		}
	})

	It("point both Deployments at an existing PriorityClass, or at none", func() {
		objs, err := helmTemplate("--set", "manager.priorityClass.create=false,manager.priorityClass.name=system-cluster-critical")
		Expect(err).NotTo(HaveOccurred())
		Expect(keys(byKey(objs))).NotTo(ContainElement(HavePrefix("PriorityClass ")))
		for _, name := range deployments {
			Expect(podSpec(objs, name)).To(HaveKeyWithValue("priorityClassName", "system-cluster-critical"), name)
		}
		dryRun(objs)
		objs, err = helmTemplate("--set", "manager.priorityClass.create=false,manager.priorityClass.name=")
		Expect(err).NotTo(HaveOccurred())
		for _, name := range deployments {
			Expect(podSpec(objs, name)).NotTo(HaveKey("priorityClassName"), name)
		}
	})
})
