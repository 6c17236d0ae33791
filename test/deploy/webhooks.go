package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/cluster"
)

// RegisterWebhooks creates the webhook configurations of
// WebhookConfigurations, calling https://127.0.0.1:<port> by URL instead
// of through the Service.
func RegisterWebhooks(ctx context.Context, c client.Client, port int) error {
	root, err := cluster.RepoRoot()
	if err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(root, WebhookConfigurations))
	if err != nil {
		return err
	}
	url := func(path *string) *string {
		u := fmt.Sprintf("https://127.0.0.1:%d%s", port, *path)
		return &u
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var probe struct{ Kind string }
		if err := utilyaml.Unmarshal([]byte(doc), &probe); err != nil {
			return err
		}
		var obj client.Object
		switch probe.Kind {
		case "MutatingWebhookConfiguration":
			var m admissionregistrationv1.MutatingWebhookConfiguration
			if err := utilyaml.Unmarshal([]byte(doc), &m); err != nil {
				return err
			}
			for i := range m.Webhooks {
				cc := &m.Webhooks[i].ClientConfig
				cc.URL, cc.Service = url(cc.Service.Path), nil
			}
			obj = &m
		case "ValidatingWebhookConfiguration":
			var v admissionregistrationv1.ValidatingWebhookConfiguration
			if err := utilyaml.Unmarshal([]byte(doc), &v); err != nil {
				return err
			}
			for i := range v.Webhooks {
				cc := &v.Webhooks[i].ClientConfig
				cc.URL, cc.Service = url(cc.Service.Path), nil
			}
			obj = &v
		default:
			continue
		}
		if err := client.IgnoreAlreadyExists(c.Create(ctx, obj)); err != nil {
			return err
		}
	}
	return nil
}

// WaitForWebhooks waits until the apiserver reaches the manager's webhooks
// over TLS and they admit: a server-side dry-run create of a JobSet comes
// back defaulted. A starting manager refuses every request until its
// JobSetPolicies are loaded, so a manager whose caches synced may not
// admit yet.
func WaitForWebhooks(ctx context.Context, c client.Client, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		js := &jobset.JobSet{}
		js.Name, js.Namespace = "webhook-probe", "default"
		js.Spec.ReplicatedJobs = []jobset.ReplicatedJob{{Name: "probe"}}
		js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Image: "probe"}}
		if last = c.Create(ctx, js, client.DryRunAll); last != nil {
			return false, nil
		}
		if js.Spec.SuccessPolicy == nil {
			last = fmt.Errorf("the mutating webhook did not default the JobSet")
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		if last != nil {
			return fmt.Errorf("the webhooks do not admit: %w (last: %w)", err, last)
		}
		return fmt.Errorf("the webhooks do not admit: %w", err)
	}
	return nil
}
