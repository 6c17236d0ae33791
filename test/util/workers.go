package util

import (
	"context"
	"path/filepath"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobsetv1alpha2 "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/images"
	"github.com/inplace-dev/inplace/test/wrappers"
)

// WorkerJobSet is an InPlaceRestart JobSet of replicas worker Pods of the
// test worker image, written as a user would: the webhook injects the
// agent. The worker asks the agent's barrier (its default URL) and logs the
// answer.
func WorkerJobSet(name, ns string, replicas int32, pfp *batchv1.PodFailurePolicy, rules ...jobsetv1alpha2.FailurePolicyRule) *jobsetv1alpha2.JobSet {
	rj := wrappers.MakeReplicatedJob("workers").Replicas(replicas).PodFailurePolicy(pfp).Obj()
	rj.Template.Spec.BackoffLimit = nil // the webhook sets what InPlaceRestart needs
	pod := &rj.Template.Spec.Template.Spec
	pod.TerminationGracePeriodSeconds = ptr.To[int64](5)
	pod.Containers[0].Image = images.Worker
	// The image's entrypoint, written out: process scope runs the command
	// under the supervisor and cannot see an image's entrypoint.
	pod.Containers[0].Command = []string{images.WorkerBinary, "run"}
	pod.Containers[0].Env = []corev1.EnvVar{
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
	}
	return wrappers.MakeJobSet(name, ns).
		ReplicatedJob(rj).
		FailurePolicy(&jobsetv1alpha2.FailurePolicy{MaxRestarts: 3, RestartStrategy: jobsetv1alpha2.InPlaceRestart, Rules: rules}).
		Obj()
}

// PodIdentity is what an in-place restart keeps: the Pod, its address and
// its node.
type PodIdentity struct{ UID, IP, Node string }

// ExpectWorkersRunning waits until the JobSet's pods Pods all run their
// worker at epoch and returns their identities by name.
func ExpectWorkersRunning(ctx context.Context, c client.Client, js *jobsetv1alpha2.JobSet, pods int, epoch int32, timeout time.Duration) map[string]PodIdentity {
	ginkgo.GinkgoHelper()
	out := map[string]PodIdentity{}
	gomega.Eventually(func(g gomega.Gomega) {
		// g.Expect throughout: a passing API error is tried again.
		var got jobsetv1alpha2.JobSet
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(gomega.Succeed())
		g.Expect(got.Status.SyncedEpoch).To(gomega.Equal(epoch))
		var list corev1.PodList
		g.Expect(c.List(ctx, &list, client.InNamespace(js.Namespace), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: js.Name})).To(gomega.Succeed())
		g.Expect(list.Items).To(gomega.HaveLen(pods))
		clear(out)
		for _, p := range list.Items {
			g.Expect(p.DeletionTimestamp).To(gomega.BeNil())
			g.Expect(p.Status.ContainerStatuses).To(gomega.ContainElement(gomega.And(
				gomega.HaveField("Name", "worker"), gomega.HaveField("State.Running", gomega.Not(gomega.BeNil())))), "pod %s", p.Name)
			out[p.Name] = PodIdentity{UID: string(p.UID), IP: p.Status.PodIP, Node: p.Spec.NodeName}
		}
	}).WithTimeout(timeout).WithPolling(250 * time.Millisecond).Should(gomega.Succeed())
	return out
}

// ExitWorker makes the worker of pod exit with code, as a person would:
// kubectl exec into its container.
func ExitWorker(ctx context.Context, kubeconfig string, pod corev1.Pod, code int) {
	ginkgo.GinkgoHelper()
	bin, err := cluster.BinDir()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	execCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	gomega.Expect(images.ExitWorker(execCtx, filepath.Join(bin, "kubectl"), kubeconfig, pod.Namespace, pod.Name, "worker", code)).To(gomega.Succeed())
}

// SetRestartScope gives js the restart scope (protocol.RestartScopeContainer
// or protocol.RestartScopeProcess).
func SetRestartScope(js *jobsetv1alpha2.JobSet, scope string) *jobsetv1alpha2.JobSet {
	if js.Annotations == nil {
		js.Annotations = map[string]string{}
	}
	js.Annotations[protocol.RestartScopeAnnotation] = scope
	return js
}
