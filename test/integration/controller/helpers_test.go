package controller

import (
	"maps"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/util"
)

const timeout = 30 * time.Second

// loadSpec reads a manifest of test/testdata/specs into the namespace.
func loadSpec(file, namespace string) *jobset.JobSet { return util.LoadSpec(file, namespace) }

func create(js *jobset.JobSet) *jobset.JobSet {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx, js)).To(Succeed())
	return js
}

func get(js *jobset.JobSet) *jobset.JobSet {
	GinkgoHelper()
	var got jobset.JobSet
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(Succeed())
	return &got
}

// jobs returns the JobSet's Jobs that are not being deleted, by name.
func jobs(g Gomega, js *jobset.JobSet) map[string]batchv1.Job {
	var list batchv1.JobList
	g.Expect(k8sClient.List(ctx, &list, client.InNamespace(js.Namespace), client.MatchingLabels{jobset.JobSetNameKey: js.Name})).To(Succeed())
	out := map[string]batchv1.Job{}
	for _, j := range list.Items {
		if j.DeletionTimestamp == nil {
			out[j.Name] = j
		}
	}
	return out
}

func jobNames(g Gomega, js *jobset.JobSet) []string {
	return sortedKeys(jobs(g, js))
}

func sortedKeys(m map[string]batchv1.Job) []string {
	names := slices.Collect(maps.Keys(m))
	slices.Sort(names)
	return names
}

// expectJobs waits until exactly the named Jobs exist (and are not being
// deleted), with the given restart attempt.
func expectJobs(js *jobset.JobSet, attempt string, names ...string) map[string]batchv1.Job {
	GinkgoHelper()
	slices.Sort(names)
	var got map[string]batchv1.Job
	Eventually(func(g Gomega) {
		got = jobs(g, js)
		g.Expect(sortedKeys(got)).To(Equal(names))
		for _, j := range got {
			g.Expect(j.Labels).To(HaveKeyWithValue(jobset.RestartsKey, attempt), "job %s", j.Name)
		}
	}).WithTimeout(timeout).Should(Succeed())
	return got
}

// expectCondition waits for a JobSet condition with status and reason.
func expectCondition(js *jobset.JobSet, t jobset.JobSetConditionType, status, reason string) *jobset.JobSet {
	GinkgoHelper()
	var got *jobset.JobSet
	Eventually(func(g Gomega) {
		got = get(js)
		c := meta.FindStatusCondition(got.Status.Conditions, string(t))
		g.Expect(c).NotTo(BeNil(), "condition %s", t)
		g.Expect(string(c.Status)).To(Equal(status), "condition %s: %+v", t, c)
		g.Expect(c.Reason).To(Equal(reason), "condition %s: %+v", t, c)
	}).WithTimeout(timeout).Should(Succeed())
	return got
}

// expectRestarts waits for status.restarts and restartsCountTowardsMax.
func expectRestarts(js *jobset.JobSet, restarts, counted int32) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		got := get(js)
		g.Expect(got.Status.Restarts).To(Equal(restarts), "restarts")
		g.Expect(got.Status.RestartsCountTowardsMax).To(Equal(counted), "restartsCountTowardsMax")
	}).WithTimeout(timeout).Should(Succeed())
}

// expectEvent waits for an Event on the JobSet with the reason.
func expectEvent(js *jobset.JobSet, reason string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var events corev1.EventList
		g.Expect(k8sClient.List(ctx, &events, client.InNamespace(js.Namespace))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(And(
			HaveField("InvolvedObject.Name", js.Name), HaveField("Reason", reason))))
	}).WithTimeout(timeout).Should(Succeed())
}

// managerWrites counts the manager's requests of the method whose path
// contains part.
func managerWrites(method, part string) int {
	n := 0
	for _, w := range fw.ManagerWrites() {
		if strings.HasPrefix(w, method+" ") && strings.Contains(w, part) {
			n++
		}
	}
	return n
}

// allPods waits until the JobSet has want Pods and returns them.
func allPods(js *jobset.JobSet, want int) []corev1.Pod {
	GinkgoHelper()
	var pods []corev1.Pod
	Eventually(func(g Gomega) {
		var list corev1.PodList
		g.Expect(k8sClient.List(ctx, &list, client.InNamespace(js.Namespace), client.MatchingLabels{jobset.JobSetNameKey: js.Name})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(want))
		pods = list.Items
	}).WithTimeout(timeout).Should(Succeed())
	return pods
}

// reportEpoch plays the agents of the JobSet's want Pods reporting epoch,
// and returns the Pods.
func reportEpoch(js *jobset.JobSet, want int, epoch string) []corev1.Pod {
	GinkgoHelper()
	pods := allPods(js, want)
	for i := range pods {
		util.SetEpoch(ctx, k8sClient, &pods[i], epoch)
	}
	return pods
}
