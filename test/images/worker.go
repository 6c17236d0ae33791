package images

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// ExitWorker makes the test worker running in container of a Pod exit with
// code, as a person would: kubectl exec into the container. The worker
// exits as told, and its container's end may end the exec session before
// kubectl sees it finish (exit code 137); what counts is what the kubelet
// then reports, which callers check.
func ExitWorker(ctx context.Context, kubectl, kubeconfig, namespace, pod, container string, code int) error {
	out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig, "exec", "-n", namespace, pod,
		"-c", container, "--", WorkerBinary, "exit", fmt.Sprint(code)).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "command terminated with exit code 137") {
		return fmt.Errorf("kubectl exec %s/%s -c %s: %w: %s", namespace, pod, container, err, out)
	}
	return nil
}
