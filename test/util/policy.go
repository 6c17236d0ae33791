package util

import (
	"context"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
)

// ExpectPolicyReady waits until the policy's Ready condition has status
// for its current generation, and returns the policy as it was then.
func ExpectPolicyReady(ctx context.Context, c client.Client, p *policyv1alpha1.JobSetPolicy, status metav1.ConditionStatus, timeout time.Duration) *policyv1alpha1.JobSetPolicy {
	ginkgo.GinkgoHelper()
	var got policyv1alpha1.JobSetPolicy
	gomega.Eventually(func(g gomega.Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(gomega.Succeed())
		cond := meta.FindStatusCondition(got.Status.Conditions, policyv1alpha1.ConditionReady)
		g.Expect(cond).NotTo(gomega.BeNil())
		g.Expect(cond.Status).To(gomega.Equal(status))
		g.Expect(got.Status.ObservedGeneration).To(gomega.Equal(got.Generation))
	}).WithTimeout(timeout).Should(gomega.Succeed())
	return &got
}
