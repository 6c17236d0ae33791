package cluster

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/inplace-dev/inplace/test/images"
)

// Real nodes run a Pod from the project's own images, a Pod resolves
// another by its hostname and subdomain through the cluster's DNS, images
// named for docker.io and registry.k8s.io come from the cluster's
// registry, a claim without a class gets a volume of the default one, and
// Stop
// leaves the host as it was: no process, mount, cgroup, interface, iptables chain or
// host path of theirs, ip_forward as before.
func TestRealNodesRunAPodAndLeaveTheHostClean(t *testing.T) {
	SkipWithoutRealNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Name: "real-nodes", ArtifactsDir: t.TempDir(), RealNodes: 2, Registry: true})
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

	resolvesPeer(ctx, t, client, c)
	provisionsClaimsOfTheDefaultClass(ctx, t, client, c)
	pullsThroughTheMirror(ctx, t, client, c)

	if err := c.Stop(true); err != nil {
		t.Errorf("Stop: %v", err)
	}
	stopped = true
	if left := c.LeftOnHost(); len(left) > 0 {
		t.Errorf("the host differs after Stop:\n%s", strings.Join(left, "\n"))
	}
}

// resolvesPeer checks what JobSet's workers rely on: a headless Service's
// Pod is found by <hostname>.<subdomain> from another Pod.
func resolvesPeer(ctx context.Context, t *testing.T, client kubernetes.Interface, c *Cluster) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "net", Namespace: "default"},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 map[string]string{"app": "peer"},
			PublishNotReadyAddresses: true,
		},
	}
	if _, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The hostname and subdomain are what the EndpointSlice controller
	// publishes and CoreDNS answers for.
	peer := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "peer", Namespace: "default", Labels: map[string]string{"app": "peer"}},
		Spec: corev1.PodSpec{
			Hostname: "peer-0", Subdomain: "net",
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			Containers:                    []corev1.Container{{Name: "pause", Image: images.Pause}},
		},
	}
	peer = createAndWait(ctx, t, client, c, peer, corev1.PodRunning)
	asker := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "asker", Namespace: "default"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "resolve", Image: images.Worker,
				Command: []string{images.WorkerBinary, "resolve", "peer-0.net", peer.Status.PodIP},
			}},
		},
	}
	createAndWait(ctx, t, client, c, asker, corev1.PodSucceeded)
}

func createAndWait(ctx context.Context, t *testing.T, client kubernetes.Interface, c *Cluster, pod *corev1.Pod, phase corev1.PodPhase) *corev1.Pod {
	t.Helper()
	if _, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = p
		if p.Status.Phase == corev1.PodFailed && phase != corev1.PodFailed {
			return false, fmt.Errorf("pod %s failed", pod.Name)
		}
		// A running peer must have its address, which the asker resolves.
		return p.Status.Phase == phase && (phase != corev1.PodRunning || p.Status.PodIP != ""), nil
	})
	if err != nil {
		t.Fatalf("pod %s did not reach %s: %v; status %+v; logs in %s", pod.Name, phase, err, last.Status, c.LogsDir())
	}
	return last
}

// pullsThroughTheMirror pushes the pause image to the cluster's registry
// under a docker.io and a registry.k8s.io path and runs each by its
// upstream name, pulled Always (a :latest tag): the nodes reach neither
// registry, so a Pod that runs got its image from the mirror.
func pullsThroughTheMirror(ctx context.Context, t *testing.T, client kubernetes.Interface, c *Cluster) {
	t.Helper()
	src, err := name.NewTag(images.Pause)
	if err != nil {
		t.Fatal(err)
	}
	// images.Build names each archive after its repository.
	archive := ""
	for _, a := range c.opts.ImageArchives {
		if filepath.Base(a) == path.Base(src.RepositoryStr())+".tar" {
			archive = a
		}
	}
	if archive == "" {
		t.Fatalf("no pause image among %v", c.opts.ImageArchives)
	}
	img, err := tarball.ImageFromPath(archive, &src)
	if err != nil {
		t.Fatal(err)
	}
	for i, upstream := range []string{"docker.io/library/inplace-mirror-check:latest", "registry.k8s.io/e2e-test-images/inplace-mirror-check:latest"} {
		ref, err := name.NewTag(upstream)
		if err != nil {
			t.Fatal(err)
		}
		// What containerd asks the mirror for: the repository without
		// its registry.
		mirrored, err := name.NewTag(c.Registry + "/" + ref.RepositoryStr() + ":" + ref.TagStr())
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(mirrored, img, remote.WithContext(ctx)); err != nil {
			t.Fatalf("pushing %s: %v", mirrored, err)
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("mirrored-%d", i), Namespace: "default"},
			Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](2),
				Containers:                    []corev1.Container{{Name: "pause", Image: upstream, ImagePullPolicy: corev1.PullAlways}},
			},
		}
		createAndWait(ctx, t, client, c, pod, corev1.PodRunning)
	}
}

// provisionsClaimsOfTheDefaultClass checks what suites written for kind
// rely on: a claim that names no class gets the default one, is bound to
// a directory of this host once its Pod is scheduled, is mounted there,
// and the directory goes with the claim.
func provisionsClaimsOfTheDefaultClass(ctx context.Context, t *testing.T, client kubernetes.Interface, c *Cluster) {
	t.Helper()
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	claim, err := client.CoreV1().PersistentVolumeClaims("default").Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(claim.Spec.StorageClassName, ""); got != DefaultStorageClass {
		t.Fatalf("the claim's class is %q, want the default %q", got, DefaultStorageClass)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "mounts", Namespace: "default"},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			Containers: []corev1.Container{{
				Name: "pause", Image: images.Worker, Command: []string{images.WorkerBinary, "pause"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"},
			}}},
		},
	}
	pod = createAndWait(ctx, t, client, c, pod, corev1.PodRunning)
	claim, err = client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := client.CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the claim's volume %q: %v", claim.Spec.VolumeName, err)
	}
	if pv.Spec.HostPath == nil || !strings.HasPrefix(pv.Spec.HostPath.Path, c.workDir+"/") {
		t.Fatalf("volume %s is not a directory of the cluster's: %+v", pv.Name, pv.Spec.PersistentVolumeSource)
	}
	if terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms; len(terms) != 1 || terms[0].MatchExpressions[0].Values[0] != pod.Spec.NodeName {
		t.Errorf("volume %s is bound to %v, want the Pod's node %s", pv.Name, terms, pod.Spec.NodeName)
	}
	if fi, err := os.Stat(pv.Spec.HostPath.Path); err != nil || !fi.IsDir() {
		t.Fatalf("volume %s: %s is no directory: %v", pv.Name, pv.Spec.HostPath.Path, err)
	}

	if err := client.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().PersistentVolumeClaims("default").Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, nil
		}
		_, err = os.Stat(pv.Spec.HostPath.Path)
		return os.IsNotExist(err), nil
	})
	if err != nil {
		t.Fatalf("volume %s and its directory outlived the claim: %v; logs in %s", pv.Name, err, c.LogsDir())
	}
}
