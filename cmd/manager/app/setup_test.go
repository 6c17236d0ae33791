package app

import (
	"strings"
	"testing"

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
