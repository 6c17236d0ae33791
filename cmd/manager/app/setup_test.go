package app

import (
	"crypto/tls"
	"slices"
	"strings"
	"testing"

	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
)

func TestApplyRole(t *testing.T) {
	cases := map[string]struct {
		controller, webhook bool
		lease               string
		wantErr             string
	}{
		RoleAll:        {controller: true, webhook: true, lease: "inplace-manager"},
		RoleController: {controller: true, lease: "inplace-manager"},
		RoleWebhook:    {webhook: true, lease: "inplace-manager-webhook"},
		"both":         {wantErr: "--role=both: want all"},
	}
	for role, tc := range cases {
		t.Run(role, func(t *testing.T) {
			cfg, err := configv1alpha1.Load("")
			if err != nil {
				t.Fatal(err)
			}
			err = ApplyRole(cfg, role)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !cfg.Controller.Disabled != tc.controller || !cfg.Webhook.Disabled != tc.webhook || cfg.LeaderElection.ResourceName != tc.lease {
				t.Errorf("controller %v, webhook %v, lease %s", !cfg.Controller.Disabled, !cfg.Webhook.Disabled, cfg.LeaderElection.ResourceName)
			}
		})
	}
}

func TestApplyRoleRefusesToRunNothing(t *testing.T) {
	cfg, err := configv1alpha1.Load("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Webhook.Disabled = true
	if err := ApplyRole(cfg, RoleWebhook); err == nil || !strings.Contains(err.Error(), "the manager would run nothing") {
		t.Errorf("error %v", err)
	}
}

// The webhook and metrics servers speak HTTP/1.1 only, so that the API
// server opens a connection per request in flight, which a Service spreads
// over the webhook's replicas (see http1Only).
func TestOptionsServeHTTP1Only(t *testing.T) {
	cfg, err := configv1alpha1.Load("")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options(cfg, NewScheme())
	server, ok := opts.WebhookServer.(*ctrlwebhook.DefaultServer)
	if !ok {
		t.Fatalf("webhook server %T, want controller-runtime's DefaultServer", opts.WebhookServer)
	}
	for name, tlsOpts := range map[string][]func(*tls.Config){"webhook": server.Options.TLSOpts, "metrics": opts.Metrics.TLSOpts} {
		// As controller-runtime's servers start: h2 offered first.
		c := &tls.Config{NextProtos: []string{"h2", "http/1.1"}}
		for _, o := range tlsOpts {
			o(c)
		}
		if !slices.Equal(c.NextProtos, []string{"http/1.1"}) {
			t.Errorf("%s server offers %v, want http/1.1 only", name, c.NextProtos)
		}
	}
}
