package pytorch

import (
	"bytes"
	"context"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// FollowLog follows the log of the Pod's training container from its start
// until that container ends. The function it returns waits at most timeout
// for that end and returns what was read, and whether the log ended.
func FollowLog(ctx context.Context, cs kubernetes.Interface, p corev1.Pod, timestamps bool) func(timeout time.Duration) (string, bool) {
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		stream, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: Container, Follow: true, Timestamps: timestamps}).Stream(ctx)
		if err != nil {
			return
		}
		defer stream.Close()
		_, _ = io.Copy(&buf, stream)
	}()
	return func(timeout time.Duration) (string, bool) {
		select {
		case <-done:
			return buf.String(), true
		case <-time.After(timeout):
			return "", false
		}
	}
}
