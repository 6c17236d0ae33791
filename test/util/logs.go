package util

import (
	"context"

	"github.com/onsi/ginkgo/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// DumpContainerLogs writes the last tail lines of every container's log in
// ns, read through the apiserver from the kubelets, and of its previous
// run, for a failed spec.
func DumpContainerLogs(ctx context.Context, cs kubernetes.Interface, ns string, tail int64) {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		ginkgo.GinkgoWriter.Printf("listing pods for their logs: %v\n", err)
		return
	}
	for _, p := range pods.Items {
		for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			for _, previous := range []bool{true, false} {
				data, err := cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, Previous: previous, TailLines: ptr.To(tail)}).DoRaw(ctx)
				if err != nil {
					continue
				}
				ginkgo.GinkgoWriter.Printf("=== log of %s/%s (previous %v)\n%s\n", p.Name, c.Name, previous, data)
			}
		}
	}
}
