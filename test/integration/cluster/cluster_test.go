package cluster

import (
	"fmt"
	"os/exec"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/test/wrappers"
)

var _ = Describe("the local cluster", func() {
	var ns *corev1.Namespace
	BeforeEach(func() {
		ns = fw.NewNamespace(ctx, k8sClient)
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
	})

	It("runs a Job: the Job controller creates its Pods and the scheduler binds them to registered Nodes", func() {
		nodes := registerNodes(ns.Name, 2)

		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "three", Namespace: ns.Name},
			Spec: batchv1.JobSpec{
				Parallelism: ptr.To[int32](3),
				Completions: ptr.To[int32](3),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					NodeSelector:  map[string]string{"test-namespace": ns.Name},
					Containers:    []corev1.Container{{Name: "worker", Image: "registry.example/worker:1"}},
				}},
			},
		}
		Expect(k8sClient.Create(ctx, job)).To(Succeed())

		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(ns.Name), client.MatchingLabels{batchv1.JobNameLabel: job.Name})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(3))
			for _, p := range pods.Items {
				g.Expect(nodes).To(ContainElement(p.Spec.NodeName), "Pod %s not bound to a registered Node", p.Name)
			}
		}).WithTimeout(30 * time.Second).Should(Succeed())
	})

	It("schedules a Pod with a RestartAllContainers rule only onto a Node that declares the feature", func() {
		plain := wrappers.MakeNode(ns.Name+"-plain").Label("test-namespace", ns.Name).Obj()
		declaring := wrappers.MakeNode(ns.Name+"-declaring").Label("test-namespace", ns.Name).
			DeclaredFeatures("RestartAllContainersOnContainerExits").Obj()
		util.CreateNode(ctx, k8sClient, plain)
		util.CreateNode(ctx, k8sClient, declaring)

		for i := range 4 {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("rules-%d", i), Namespace: ns.Name},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					NodeSelector:  map[string]string{"test-namespace": ns.Name},
					Containers: []corev1.Container{{
						Name: "worker", Image: "registry.example/worker:1",
						RestartPolicy: ptr.To(corev1.ContainerRestartPolicyNever),
						RestartPolicyRules: []corev1.ContainerRestartRule{{
							Action: corev1.ContainerRestartRuleActionRestartAllContainers,
							ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{
								Operator: corev1.ContainerRestartRuleOnExitCodesOpNotIn, Values: []int32{0},
							},
						}},
					}},
				},
			}
			Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		}
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(ns.Name))).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(4))
			for _, p := range pods.Items {
				g.Expect(p.Spec.NodeName).To(Equal(declaring.Name), "Pod %s", p.Name)
			}
		}).WithTimeout(30 * time.Second).Should(Succeed())
	})

	It("answers the kubectl that hack/ built", func() {
		bin, err := cluster.BinDir()
		Expect(err).NotTo(HaveOccurred())
		out, err := exec.Command(bin+"/kubectl", "--kubeconfig", fw.Cluster.Kubeconfig, "get", "--raw", "/readyz").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Expect(strings.TrimSpace(string(out))).To(Equal("ok"))

		out, err = exec.Command(bin+"/kubectl", "--kubeconfig", fw.Cluster.Kubeconfig, "version", "-o", "json").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Expect(string(out)).To(ContainSubstring(`"gitVersion": "v1.36.`), "server and client report their real version")
	})
})

// registerNodes registers n schedulable Nodes labelled for this namespace
// and returns their names.
func registerNodes(namespace string, n int) []string {
	GinkgoHelper()
	var names []string
	for i := range n {
		node := wrappers.MakeNode(fmt.Sprintf("%s-node-%d", namespace, i)).Label("test-namespace", namespace).Obj()
		util.CreateNode(ctx, k8sClient, node)
		names = append(names, node.Name)
	}
	return names
}
