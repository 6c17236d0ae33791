package restartbench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/deploy"
	"github.com/inplace-dev/inplace/test/images"
	"github.com/inplace-dev/inplace/test/upstreamjobset"
	"github.com/inplace-dev/inplace/test/wrappers"
)

// switchToUpstream hands the cluster to upstream JobSet's controller:
// inplace-manager stops and its admission goes, and upstream's release
// manifests, rendered from its module, are applied over inplace's CRD (as
// a user going back to upstream would apply them). It returns once
// upstream's webhooks admit a JobSet.
func (e *env) switchToUpstream(ctx context.Context) error {
	// Two controllers on one JobSet would make every figure after this
	// one wrong.
	if err := e.stopManager(); err != nil {
		return err
	}
	if err := deploy.RemoveAdmission(ctx, e.client); err != nil {
		return err
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "inplace-bench-upstream-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	manifests, err := upstreamjobset.Manifests(ctx, root, dir)
	if err != nil {
		return err
	}
	// inplace's CRD was applied by another field manager: upstream's
	// takes its fields over.
	if err := e.kubectlRun(ctx, time.Minute, "apply", "--server-side", "--force-conflicts", "-f", manifests); err != nil {
		return err
	}
	if err := e.kubectlRun(ctx, 6*time.Minute, "-n", upstreamjobset.Namespace, "rollout", "status", "deployment", upstreamjobset.Deployment, "--timeout=5m"); err != nil {
		return err
	}
	// Ready once its certificate is mounted, upstream's controller writes
	// the CA into its webhook configurations, which may reach the API
	// server a moment later.
	probe := wrappers.MakeJobSet("admission-probe", "default").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Obj()).Obj()
	var last error
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		last = e.client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return last == nil, nil
	}); err != nil {
		if last != nil {
			return fmt.Errorf("upstream's webhooks did not admit a JobSet within 2 minutes: %w (last: %w)", err, last)
		}
		return fmt.Errorf("upstream's webhooks did not admit a JobSet within 2 minutes: %w", err)
	}
	if err := e.pullOnEveryNode(ctx, images.UpstreamAgentImage); err != nil {
		return err
	}
	e.upstream = true
	return nil
}

// pullOnEveryNode has every node pull image, by running it once on each:
// inplace's agent is in the nodes' containerd from their start, and a
// first start of upstream's that waited for its pull would time the
// registry, not the agent.
func (e *env) pullOnEveryNode(ctx context.Context, image string) error {
	var nodes corev1.NodeList
	if err := e.client.List(ctx, &nodes); err != nil {
		return err
	}
	pods := make([]*corev1.Pod, len(nodes.Items))
	for i, n := range nodes.Items {
		pods[i] = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "pull-" + n.Name, Namespace: metav1.NamespaceDefault},
			Spec: corev1.PodSpec{NodeName: n.Name, RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []corev1.Container{{Name: "pull", Image: image, Command: []string{"/bin/true"}}}},
		}
		if err := e.client.Create(ctx, pods[i]); err != nil {
			return err
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, p := range pods {
			if err := e.client.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil || p.Status.Phase != corev1.PodSucceeded {
				return false, nil
			}
		}
		return true, nil
	})
	for _, p := range pods {
		_ = e.client.Delete(ctx, p)
	}
	if err != nil {
		return fmt.Errorf("pulling %s on every node: %w", image, err)
	}
	return nil
}

// upstreamAgents gives the JobSet's Pods upstream's in-place restart
// agent, as upstream's sidecar-mode example runs it: its Pod template
// (its agent, restart rules and service account, granted in the JobSet's
// namespace) and its Job settings. The worker container keeps the
// example's name; realWorkers makes it the test worker.
func (e *env) upstreamAgents(ctx context.Context, js *jobset.JobSet) error {
	root, err := cluster.RepoRoot()
	if err != nil {
		return err
	}
	example, err := upstreamjobset.Example(root, upstreamjobset.SidecarExample, js.Namespace)
	if err != nil {
		return err
	}
	if err := upstreamjobset.GrantAgent(ctx, e.client, js.Namespace); err != nil {
		return err
	}
	src := example.Spec.ReplicatedJobs[0].Template.Spec
	for i := range js.Spec.ReplicatedJobs {
		job := &js.Spec.ReplicatedJobs[i].Template.Spec
		job.BackoffLimit, job.PodReplacementPolicy = src.BackoffLimit, src.PodReplacementPolicy
		job.Template.Spec = *src.Template.Spec.DeepCopy()
	}
	return nil
}

// kubectlRun runs the cluster's kubectl against it, within limit.
func (e *env) kubectlRun(ctx context.Context, limit time.Duration, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	out, err := exec.CommandContext(ctx, e.kubectl, append([]string{"--kubeconfig", e.cluster.Kubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
