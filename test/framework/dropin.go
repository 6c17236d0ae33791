package framework

import (
	"context"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
)

// The commands that install inplace under upstream JobSet's names, as
// docs/how-to/install.md shows them: what Kueue and Kubeflow Trainer
// expect to find (the Deployment jobset-system/jobset-controller-manager).
const (
	DropIn        = "kubectl apply --server-side -k config/jobset-names"
	DropInRollout = "kubectl -n jobset-system rollout status deployment/jobset-controller-manager --timeout=3m"
)

// InstallDropIn runs DropIn and DropInRollout as a user of the cluster
// would (Run), and fails the spec if either fails.
func (f *Framework) InstallDropIn(ctx context.Context) {
	ginkgo.GinkgoHelper()
	ginkgo.By("installing inplace under upstream JobSet's names: " + DropIn)
	for _, line := range []string{DropIn, DropInRollout} {
		out, err := f.Run(ctx, 3*time.Minute, nil, "sh", "-c", line)
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), out)
	}
}
