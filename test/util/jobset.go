package util

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobsetv1alpha2 "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// JobSetPods lists the Pods of a JobSet, by name.
func JobSetPods(ctx context.Context, c client.Client, js *jobsetv1alpha2.JobSet) []corev1.Pod {
	ginkgo.GinkgoHelper()
	var list corev1.PodList
	gomega.Expect(c.List(ctx, &list, client.InNamespace(js.Namespace), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: js.Name})).To(gomega.Succeed())
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// GetJobSet reads a JobSet as it is now.
func GetJobSet(ctx context.Context, c client.Client, js *jobsetv1alpha2.JobSet) *jobsetv1alpha2.JobSet {
	ginkgo.GinkgoHelper()
	var got jobsetv1alpha2.JobSet
	gomega.Expect(c.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(gomega.Succeed())
	return &got
}

// ExpectJobSetCondition waits until the JobSet has the condition, True with
// the reason, and returns the JobSet as it was then.
func ExpectJobSetCondition(ctx context.Context, c client.Client, js *jobsetv1alpha2.JobSet, t jobsetv1alpha2.JobSetConditionType, reason string, timeout time.Duration) *jobsetv1alpha2.JobSet {
	ginkgo.GinkgoHelper()
	var got *jobsetv1alpha2.JobSet
	gomega.Eventually(func(g gomega.Gomega) {
		got = GetJobSet(ctx, c, js)
		cond := meta.FindStatusCondition(got.Status.Conditions, string(t))
		g.Expect(cond).NotTo(gomega.BeNil())
		g.Expect(cond.Status).To(gomega.Equal(metav1.ConditionTrue))
		g.Expect(cond.Reason).To(gomega.Equal(reason))
	}).WithTimeout(timeout).Should(gomega.Succeed())
	return got
}

// UpdateJobSet changes a JobSet as a controller (Kueue, say) does: read,
// change, write, and again on a conflict.
func UpdateJobSet(ctx context.Context, c client.Client, js *jobsetv1alpha2.JobSet, change func(*jobsetv1alpha2.JobSet)) {
	ginkgo.GinkgoHelper()
	gomega.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var got jobsetv1alpha2.JobSet
		if err := c.Get(ctx, client.ObjectKeyFromObject(js), &got); err != nil {
			return err
		}
		change(&got)
		return c.Update(ctx, &got)
	})).To(gomega.Succeed())
}

// ContainerStatuses are a Pod's container statuses, init containers (a
// sidecar agent) first.
func ContainerStatuses(p *corev1.Pod) []corev1.ContainerStatus {
	return slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses)
}
