package util

import (
	"context"
	"fmt"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// This file plays the kubelet for suites that drive Pods by hand: it writes
// the Pod statuses a kubelet would write, and finishes graceful deletions,
// which without a kubelet would leave bound Pods Terminating forever.

// RunPodTerminator finishes the deletion of every Pod marked for deletion,
// as a kubelet does once the containers stopped, until ctx ends.
func RunPodTerminator(ctx context.Context, cs kubernetes.Interface) {
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "pods", metav1.NamespaceAll, fields.Everything())
	finish := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.DeletionTimestamp == nil {
			return
		}
		err := cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To[int64](0),
			Preconditions:      &metav1.Preconditions{UID: &pod.UID},
		})
		if err != nil && ctx.Err() == nil {
			// NotFound and Conflict mean someone else finished it.
			fmt.Fprintf(ginkgo.GinkgoWriter, "terminator: deleting pod %s/%s: %v\n", pod.Namespace, pod.Name, err)
		}
	}
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &corev1.Pod{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    finish,
			UpdateFunc: func(_, obj any) { finish(obj) },
		},
	})
	go informer.Run(ctx.Done())
}

// JobPods returns the Pods of a Job that are not being deleted.
func JobPods(ctx context.Context, c client.Client, namespace, job string) []corev1.Pod {
	ginkgo.GinkgoHelper()
	var pods corev1.PodList
	gomega.Expect(c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{batchv1.JobNameLabel: job})).To(gomega.Succeed())
	out := pods.Items[:0]
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// SetPodsRunning waits for want Pods of the Job and marks every one Running
// and Ready.
func SetPodsRunning(ctx context.Context, c client.Client, namespace, job string, want int) {
	ginkgo.GinkgoHelper()
	pods := waitJobPods(ctx, c, namespace, job, want)
	for i := range pods {
		updatePodStatus(ctx, c, &pods[i], func(s *corev1.PodStatus) {
			s.Phase = corev1.PodRunning
			s.Conditions = []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()},
			}
			s.ContainerStatuses = containerStatuses(&pods[i], func(string) corev1.ContainerState {
				return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
			})
		})
	}
}

// FinishPod ends a Pod: its first container exits with exitCode; the Pod
// Succeeds on 0 and Fails otherwise.
func FinishPod(ctx context.Context, c client.Client, pod *corev1.Pod, exitCode int32) {
	ginkgo.GinkgoHelper()
	updatePodStatus(ctx, c, pod, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodSucceeded
		if exitCode != 0 {
			s.Phase = corev1.PodFailed
		}
		s.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()}}
		first := pod.Spec.Containers[0].Name
		s.ContainerStatuses = containerStatuses(pod, func(name string) corev1.ContainerState {
			code := int32(0)
			if name == first {
				code = exitCode
			}
			return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, FinishedAt: metav1.Now()}}
		})
	})
}

// FinishJobPods waits for want Pods of the Job and ends each as FinishPod.
func FinishJobPods(ctx context.Context, c client.Client, namespace, job string, want int, exitCode int32) {
	ginkgo.GinkgoHelper()
	pods := waitJobPods(ctx, c, namespace, job, want)
	for i := range pods {
		FinishPod(ctx, c, &pods[i], exitCode)
	}
}

// waitJobPods waits until the Job has want Pods not being deleted.
func waitJobPods(ctx context.Context, c client.Client, namespace, job string, want int) []corev1.Pod {
	ginkgo.GinkgoHelper()
	var pods []corev1.Pod
	gomega.Eventually(func(g gomega.Gomega) {
		pods = JobPods(ctx, c, namespace, job)
		g.Expect(pods).To(gomega.HaveLen(want), "pods of job %s", job)
	}).WithTimeout(30 * time.Second).Should(gomega.Succeed())
	return pods
}

func containerStatuses(pod *corev1.Pod, state func(name string) corev1.ContainerState) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for _, ctr := range pod.Spec.Containers {
		out = append(out, corev1.ContainerStatus{Name: ctr.Name, Image: ctr.Image, State: state(ctr.Name), Ready: state(ctr.Name).Running != nil})
	}
	return out
}

func updatePodStatus(ctx context.Context, c client.Client, pod *corev1.Pod, mutate func(*corev1.PodStatus)) {
	ginkgo.GinkgoHelper()
	gomega.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		mutate(&pod.Status)
		return c.Status().Update(ctx, pod)
	})).To(gomega.Succeed())
}

// ExitContainer records that a container of a running Pod terminated with
// exitCode, as a kubelet does before it restarts the Pod's containers in
// place; the Pod stays Running.
func ExitContainer(ctx context.Context, c client.Client, pod *corev1.Pod, container string, exitCode int32) {
	ginkgo.GinkgoHelper()
	updatePodStatus(ctx, c, pod, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodRunning
		s.ContainerStatuses = containerStatuses(pod, func(name string) corev1.ContainerState {
			if name == container {
				return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, FinishedAt: metav1.Now()}}
			}
			return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
		})
	})
}

// SetEpoch writes a Pod's epoch annotation, as its agent does.
func SetEpoch(ctx context.Context, c client.Client, pod *corev1.Pod, epoch string) {
	ginkgo.GinkgoHelper()
	patch := client.MergeFrom(pod.DeepCopy())
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations["jobset.sigs.k8s.io/epoch"] = epoch
	gomega.Expect(c.Patch(ctx, pod, patch)).To(gomega.Succeed())
}
