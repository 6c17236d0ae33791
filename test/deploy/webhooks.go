package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inplace-dev/inplace/test/cluster"
)

// RegisterWebhooks creates the webhook configurations of
// config/webhook/manifests.yaml, calling https://127.0.0.1:<port> by URL
// instead of through the Service.
func RegisterWebhooks(ctx context.Context, c client.Client, port int) error {
	root, err := cluster.RepoRoot()
	if err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(root, "config", "webhook", "manifests.yaml"))
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
