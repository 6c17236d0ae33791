package v1alpha1

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadDefaults(t *testing.T) {
	cfg, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if !*cfg.LeaderElection.LeaderElect || cfg.LeaderElection.LeaseDuration.Duration != 15*time.Second ||
		cfg.Metrics.BindAddress != ":8443" || cfg.Health.ProbeBindAddress != ":8081" ||
		*cfg.ClientConnection.QPS != 500 || cfg.Controller.MaxConcurrentReconciles != 5 || cfg.Controller.ChildParallelism != 50 ||
		cfg.Controller.FatalExitSettle.Duration != 2*time.Second || cfg.Agent.SupervisorVolume != SupervisorVolumeEmptyDir {
		t.Errorf("unexpected defaults: %+v", cfg)
	}
}

func TestLoad(t *testing.T) {
	cases := map[string]struct {
		file    string
		wantErr string
		check   func(*Configuration) bool
	}{
		"overrides and defaults together": {
			file: "apiVersion: config.inplace.dev/v1alpha1\nkind: Configuration\ncontroller:\n  maxConcurrentReconciles: 20\n",
			check: func(c *Configuration) bool {
				return c.Controller.MaxConcurrentReconciles == 20 && c.Controller.ChildParallelism == 50
			},
		},
		"policy timeouts": {
			file: "apiVersion: config.inplace.dev/v1alpha1\nkind: Configuration\npolicies:\n  evaluationTimeout: 1s\n",
			check: func(c *Configuration) bool {
				return c.Policies.EvaluationTimeout.Duration == time.Second && c.Policies.RequestTimeout.Duration == 5*time.Second
			},
		},
		"a zero policy timeout is an error": {
			file:    "apiVersion: config.inplace.dev/v1alpha1\nkind: Configuration\npolicies:\n  requestTimeout: 0s\n",
			wantErr: "policies.requestTimeout is 0s: set a duration above 0 and at most 8s",
		},
		"a policy timeout above the request's is an error": {
			file:    "apiVersion: config.inplace.dev/v1alpha1\nkind: Configuration\npolicies:\n  evaluationTimeout: 6s\n",
			wantErr: "policies.evaluationTimeout (6s) is above policies.requestTimeout (5s): lower it",
		},
		"a request timeout beyond the webhooks' is an error": {
			file:    "apiVersion: config.inplace.dev/v1alpha1\nkind: Configuration\npolicies:\n  requestTimeout: 12s\n",
			wantErr: "policies.requestTimeout is 12s: set a duration above 0 and at most 8s",
		},
		"the policy evaluator: processes by default": {
			file: "apiVersion: config.inplace.dev/v1alpha1\nkind: Configuration\npolicies:\n  evaluator:\n    processes: 4\n",
			check: func(c *Configuration) bool {
				ev := c.Policies.Evaluator
				return ev.Isolation == IsolationProcess && ev.Processes == 4 && ev.MemoryLimit.Value() == 256<<20
			},
		},
		"the policy evaluator in the manager's process": {
			file: "apiVersion: config.inplace.dev/v1alpha1\nkind: Configuration\npolicies:\n  evaluator:\n    isolation: None\n",
			check: func(c *Configuration) bool {
				return c.Policies.Evaluator.Isolation == IsolationNone
			},
		},
		"an unknown isolation is an error": {
			file:    "apiVersion: config.inplace.dev/v1alpha1\nkind: Configuration\npolicies:\n  evaluator:\n    isolation: Thread\n",
			wantErr: `policies.evaluator.isolation is "Thread": use Process (the default) or None`,
		},
		"no evaluator process is an error": {
			file:    "apiVersion: config.inplace.dev/v1alpha1\nkind: Configuration\npolicies:\n  evaluator:\n    processes: -1\n",
			wantErr: "policies.evaluator.processes is -1: set from 1 to 64",
		},
		"an evaluator memory limit below what it holds is an error": {
			file:    "apiVersion: config.inplace.dev/v1alpha1\nkind: Configuration\npolicies:\n  evaluator:\n    memoryLimit: 10Mi\n",
			wantErr: "policies.evaluator.memoryLimit is 10Mi: set at least 64Mi",
		},
		"the fatal exit settle: 2s by default, 0 turns it off": {
			file: "apiVersion: config.inplace.dev/v1alpha1\nkind: Configuration\ncontroller:\n  fatalExitSettle: 0s\n",
			check: func(c *Configuration) bool {
				return c.Controller.FatalExitSettle.Duration == 0
			},
		},
		"a negative fatal exit settle is an error": {
			file:    "apiVersion: config.inplace.dev/v1alpha1\nkind: Configuration\ncontroller:\n  fatalExitSettle: -1s\n",
			wantErr: "controller.fatalExitSettle is -1s: set a duration from 0 (off) to 1m",
		},
		"a token that lives longer than a Pod accepts is an error": {
			file:    "apiVersion: config.inplace.dev/v1alpha1\nkind: Configuration\nagent:\n  reports:\n    tokenExpirationSeconds: 4294967296\n",
			wantErr: "agent.reports.tokenExpirationSeconds is 4294967296: set from 600",
		},
		"the supervisor from an image volume": {
			file: "apiVersion: config.inplace.dev/v1alpha1\nkind: Configuration\nagent:\n  supervisorVolume: Image\n",
			check: func(c *Configuration) bool {
				return c.Agent.SupervisorVolume == SupervisorVolumeImage
			},
		},
		"an unknown supervisor volume is an error": {
			file:    "apiVersion: config.inplace.dev/v1alpha1\nkind: Configuration\nagent:\n  supervisorVolume: HostPath\n",
			wantErr: `agent.supervisorVolume is "HostPath": use EmptyDir (the default) or Image`,
		},
		"upstream JobSet: jobset-system and 10s by default, the namespace set": {
			file: "apiVersion: config.inplace.dev/v1alpha1\nkind: Configuration\ncontroller:\n  upstreamJobSet:\n    namespace: jobset\n",
			check: func(c *Configuration) bool {
				return c.Controller.UpstreamJobSet.Namespace == "jobset" && c.Controller.UpstreamJobSet.CheckInterval.Duration == 2*time.Second
			},
		},
		"an upstream check interval of 0 is an error": {
			file:    "apiVersion: config.inplace.dev/v1alpha1\nkind: Configuration\ncontroller:\n  upstreamJobSet:\n    checkInterval: 0s\n",
			wantErr: "controller.upstreamJobSet.checkInterval is 0s: set a duration from 100ms to 5m",
		},
		"unknown field is an error": {
			file:    "apiVersion: config.inplace.dev/v1alpha1\nkind: Configuration\ncontroler: {}\n",
			wantErr: `unknown field "controler"`,
		},
		"wrong kind is an error": {
			file:    "apiVersion: v1\nkind: ConfigMap\n",
			wantErr: `want "config.inplace.dev/v1alpha1"/"Configuration"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(cfg) {
				t.Errorf("unexpected configuration %+v", cfg)
			}
		})
	}
}

func TestLoadRefusesKindsTheInventoryCannotHoldWhole(t *testing.T) {
	for kind, want := range map[string]string{
		"{version: v1, kind: Secret}":               "Secret cannot be synced",
		"{group: batch, version: v1, kind: Job}":    "holds only the Jobs of JobSets",
		"{version: v1, kind: Pod}":                  "holds only the Pods of JobSets",
		"{group: kueue.x-k8s.io, kind: LocalQueue}": "version and kind are required",
	} {
		path := filepath.Join(t.TempDir(), "config.yaml")
		data := "apiVersion: config.inplace.dev/v1alpha1\nkind: Configuration\npolicies:\n  inventory:\n    sync: [" + kind + "]\n"
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", kind, err, want)
		}
	}
}
