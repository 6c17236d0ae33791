package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/simnode"
	"github.com/inplace-dev/inplace/test/util"
)

const timeout = 60 * time.Second

func loadStory1WithoutAgent(namespace string) *jobset.JobSet {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "specs", "inplace-story1.yaml"))
	Expect(err).NotTo(HaveOccurred())
	var js jobset.JobSet
	Expect(yaml.UnmarshalStrict(data, &js)).To(Succeed())
	js.Namespace = namespace
	delete(js.Annotations, jobset.ExclusiveKey)
	for i := range js.Spec.ReplicatedJobs {
		pod := &js.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		pod.InitContainers = nil
		pod.Resources = nil
	}
	return &js
}

func podsOf(js *jobset.JobSet) []corev1.Pod {
	GinkgoHelper()
	var list corev1.PodList
	Expect(k8sClient.List(ctx, &list, client.InNamespace(js.Namespace), client.MatchingLabels{jobset.JobSetNameKey: js.Name})).To(Succeed())
	return list.Items
}

// expectRunning waits until every expected Pod runs its workers at the
// synced epoch.
func expectRunning(js *jobset.JobSet, want int, epoch int32) map[string]types.UID {
	GinkgoHelper()
	uids := map[string]types.UID{}
	Eventually(func(g Gomega) {
		var got jobset.JobSet
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(Succeed())
		g.Expect(got.Status.SyncedEpoch).To(Equal(epoch), "syncedEpoch")
		pods := podsOf(js)
		g.Expect(pods).To(HaveLen(want))
		for _, p := range pods {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
			g.Expect(p.Annotations).To(HaveKeyWithValue(jobset.EpochKey, itoa(epoch)), "pod %s", p.Name)
			for _, cs := range p.Status.ContainerStatuses {
				g.Expect(cs.State.Running).NotTo(BeNil(), "container %s of pod %s", cs.Name, p.Name)
			}
			uids[p.Name] = p.UID
		}
	}).WithTimeout(timeout).WithPolling(200 * time.Millisecond).Should(Succeed())
	return uids
}

var _ = Describe("in-place restart", func() {
	var ns *corev1.Namespace
	BeforeEach(func() {
		ns = fw.NewNamespace(ctx, k8sClient)
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
	})

	It("Story 1: one worker exits, every Pod restarts in place and the epoch advances by one", func() {
		js := loadStory1WithoutAgent(ns.Name)
		Expect(k8sClient.Create(ctx, js)).To(Succeed())
		before := expectRunning(js, 8, 1)

		victim := podsOf(js)[3]
		patch := client.MergeFrom(victim.DeepCopy())
		victim.Annotations[simnode.ExitCodeAnnotation] = "1"
		Expect(k8sClient.Patch(ctx, &victim, patch)).To(Succeed())

		after := expectRunning(js, 8, 2)
		Expect(after).To(Equal(before), "a Pod was recreated instead of restarted in place")
		var got jobset.JobSet
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(Succeed())
		Expect(got.Status.Restarts).To(Equal(int32(1)))
		Expect(got.Status.InPlaceRestarts).To(Equal(int32(1)))
		for _, p := range podsOf(js) {
			for _, cs := range p.Status.ContainerStatuses {
				Expect(cs.RestartCount).To(Equal(int32(1)), "container %s of pod %s restarted once", cs.Name, p.Name)
			}
		}
	})
})

func itoa(i int32) string { return strconv.Itoa(int(i)) }
