package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/inplace-dev/inplace/test/images"
)

// Real nodes run a Pod from the project's own images, and Stop leaves the
// host as it was: no process, mount, cgroup, interface, iptables chain or
// host path of theirs, ip_forward as before.
func TestRealNodesRunAPodAndLeaveTheHostClean(t *testing.T) {
	SkipWithoutRealNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Name: "real-nodes", ArtifactsDir: t.TempDir(), RealNodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = c.Stop(true)
		}
	}()

	client := kubernetes.NewForConfigOrDie(c.Config)
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		info := n.Status.NodeInfo
		if !strings.HasPrefix(info.ContainerRuntimeVersion, "containerd://") || info.KubeletVersion == "" {
			t.Errorf("node %s: runtime %q, kubelet %q: want a real kubelet on containerd", n.Name, info.ContainerRuntimeVersion, info.KubeletVersion)
		}
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "default"}}
	_, _ = client.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: "default"},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			Containers:                    []corev1.Container{{Name: "worker", Image: images.Worker}},
		},
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		last, err = client.CoreV1().Pods("default").Get(ctx, "worker", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return last.Status.Phase == corev1.PodRunning && last.Status.PodIP != "", nil
	})
	if err != nil {
		t.Fatalf("the Pod did not run: %v; status %+v; logs in %s", err, last.Status, c.LogsDir())
	}

	if err := c.Stop(true); err != nil {
		t.Errorf("Stop: %v", err)
	}
	stopped = true
	if left := c.LeftOnHost(); len(left) > 0 {
		t.Errorf("the host differs after Stop:\n%s", strings.Join(left, "\n"))
	}
}
