package v1alpha1

import (
	"fmt"
	"net"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

const (
	// APIVersion and Kind identify the configuration file.
	APIVersion = "config.inplace.dev/v1alpha1"
	Kind       = "Configuration"
)

// Configuration configures inplace-manager.
type Configuration struct {
	metav1.TypeMeta `json:",inline"`

	// LeaderElection lets several replicas run with one active.
	LeaderElection LeaderElection `json:"leaderElection"`
	// Metrics is where Prometheus metrics are served.
	Metrics Metrics `json:"metrics"`
	// Health is where the liveness and readiness probes are served.
	Health Health `json:"health"`
	// ClientConnection limits the manager's requests to the apiserver.
	ClientConnection ClientConnection `json:"clientConnection"`
	// Controller tunes the JobSet controller.
	Controller Controller `json:"controller"`
	// Agent is the sidecar injected into the Pods of InPlaceRestart JobSets.
	Agent Agent `json:"agent"`
	// Webhook configures the admission webhooks.
	Webhook Webhook `json:"webhook"`
	// Policies configures the policy engine.
	Policies Policies `json:"policies"`
}

// Agent describes the injected agent sidecar.
type Agent struct {
	// Image of the agent. Default ghcr.io/inplace-dev/inplace-agent:latest.
	// An image of its own must keep the supervisor's binary at
	// /usr/local/bin/inplace-supervisor: in process scope the agent's
	// postStart hook copies it from there, or the workers run it from
	// there (SupervisorVolume).
	Image string `json:"image,omitempty"`
	// SupervisorVolume is how the supervisor's binary reaches the worker
	// containers in process and in-process scope. EmptyDir (the default):
	// the agent container's postStart hook copies it onto an emptyDir,
	// which works on every node, and the workers' containers start only
	// after the copy. Image: the workers mount the agent's image as a
	// read-only image volume and run the binary from it, with no copy and
	// no hook; every node must mount image volumes with a subPath,
	// executable (Kubernetes 1.35 or later, with containerd 2.2 or later,
	// or CRI-O 1.33 or later), or its Pods' workers do not start.
	SupervisorVolume SupervisorVolume `json:"supervisorVolume,omitempty"`
	// ContainerName of the injected init container. Default inplace-agent.
	ContainerName string `json:"containerName,omitempty"`
	// RestartExitCode is the exit code with which the agent restarts its Pod
	// in place. Default 88.
	RestartExitCode int32 `json:"restartExitCode,omitempty"`
	// BarrierPort is the port of the agent's /barrier-is-lifted and /healthz
	// endpoints; it must not clash with a port of the workers. Default 18080.
	BarrierPort int32 `json:"barrierPort,omitempty"`
	// BarrierTimeoutSeconds is how long the startup probe lets the barrier
	// hold before the kubelet restarts the agent. Default 86400.
	BarrierTimeoutSeconds int32 `json:"barrierTimeoutSeconds,omitempty"`
	// Reports configures how agents report to the JobSet controller.
	Reports AgentReports `json:"reports"`
	// Resources of the agent container. Default requests 10m CPU and 32Mi,
	// limits 200m CPU and 64Mi: every container gets both, so that a
	// cluster's guardrail requiring limits admits InPlaceRestart JobSets.
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// SupervisorVolume is a kind of volume that carries the supervisor's
// binary to the worker containers.
type SupervisorVolume string

// The supervisor's volumes.
const (
	SupervisorVolumeEmptyDir SupervisorVolume = "EmptyDir"
	SupervisorVolumeImage    SupervisorVolume = "Image"
)

// AgentReports configures the agents' direct reports: each agent tells
// the JobSet controller's leader its epoch, its workers' exits and their
// readiness over HTTPS, authenticated by a projected service-account token
// bound to its Pod, instead of writing its Pod
// (docs/explanation/agent-reports.md). Read by the webhook (which injects
// the token) and by the controller (which serves the endpoint): give both
// the same values.
type AgentReports struct {
	// Disabled turns direct reports off: the webhook injects no token, the
	// controller serves no endpoint, and agents write their Pods.
	Disabled bool `json:"disabled,omitempty"`
	// Audience of the agents' tokens. The controller accepts no token
	// for another audience, and the API server none for this one.
	// Default inplace.dev/agent-reports.
	Audience string `json:"audience,omitempty"`
	// TokenExpirationSeconds of the projected token; the kubelet renews
	// it at 80 % of its life. Default 3600, at least 600.
	TokenExpirationSeconds int64 `json:"tokenExpirationSeconds,omitempty"`
	// BindAddress the leader serves reports on. Default :9445.
	BindAddress string `json:"bindAddress,omitempty"`
	// PodFallback lets an agent that cannot reach the endpoint (a
	// NetworkPolicy, an older manager) write its Pod instead, which needs
	// the agents' right to patch Pods (the ClusterRole
	// inplace-agent-pods). false: agents only ever report directly, and
	// the ClusterRole can drop patch (the chart's
	// agent.reports.podFallback value does). Default true.
	PodFallback *bool `json:"podFallback,omitempty"`
	// AdvertiseAddress is the host:port agents dial to reach the leader.
	// Default the manager's POD_IP (from the Downward API) and
	// BindAddress's port.
	AdvertiseAddress string `json:"advertiseAddress,omitempty"`
}

// Webhook configures the admission webhooks.
type Webhook struct {
	// Port of the webhook server. Default 9443.
	Port int `json:"port,omitempty"`
	// CertDir holds tls.crt and tls.key; they are reloaded when they change.
	// Default /tmp/k8s-webhook-server/serving-certs.
	CertDir string `json:"certDir,omitempty"`
	// ClientCAName names a CA bundle in CertDir. Set, the webhook server
	// accepts only clients that present a certificate it signed: the
	// apiserver, configured to present one (its admission configuration's
	// kubeconfig), and nobody else who can reach the webhook Service.
	// Empty, any client is served. See docs/explanation/security.md.
	ClientCAName string `json:"clientCAName,omitempty"`
	// SelfSignedCerts makes the manager create its own CA and serving
	// certificate in CertDir and write the CA into the caBundle of both
	// webhook configurations, for clusters without cert-manager.
	SelfSignedCerts bool `json:"selfSignedCerts,omitempty"`
	// Hosts are the names of the serving certificate with SelfSignedCerts.
	// Default: the webhook Service's names in the manager's namespace,
	// localhost and 127.0.0.1.
	Hosts []string `json:"hosts,omitempty"`
	// MutatingConfigurationName and ValidatingConfigurationName name the
	// webhook configurations whose caBundle SelfSignedCerts writes.
	// Defaults inplace-mutating-webhook and inplace-validating-webhook.
	MutatingConfigurationName   string `json:"mutatingConfigurationName,omitempty"`
	ValidatingConfigurationName string `json:"validatingConfigurationName,omitempty"`
	// Disabled turns the webhook server off (the controller alone).
	Disabled bool `json:"disabled,omitempty"`
}

// Policies configures the policy engine.
type Policies struct {
	// DisabledBuiltins names built-in policies that are not evaluated, for
	// an emergency. The names are those of policies/builtin.
	DisabledBuiltins []string `json:"disabledBuiltins,omitempty"`
	// AuditInterval is how often existing JobSets are evaluated against the
	// JobSetPolicies. Default 60s; 0s disables the audit.
	AuditInterval *metav1.Duration `json:"auditInterval,omitempty"`
	// EvaluationTimeout bounds one policy on one JobSet; a policy that
	// exceeds it has failed, and a Deny policy that failed denies.
	// Default 1s.
	EvaluationTimeout *metav1.Duration `json:"evaluationTimeout,omitempty"`
	// RequestTimeout bounds every policy on one admission request
	// together, every pass of the mutating webhook's patch rules included;
	// at most 8s, within the webhooks' own timeout of 10s. Default 5s.
	RequestTimeout *metav1.Duration `json:"requestTimeout,omitempty"`
	// ExemptNamespaces are namespaces whose JobSets no JobSetPolicy
	// applies to, at admission or in the audit; a trailing * matches any
	// suffix. The built-in policies, which hold the JobSet API's own
	// rules, still apply. Only who can edit this configuration (the
	// manager's namespace) can exempt a namespace: a policy's subjects
	// cannot.
	ExemptNamespaces []string `json:"exemptNamespaces,omitempty"`
	// Inventory is what the manager syncs into data.inventory for the
	// policies.
	Inventory Inventory `json:"inventory,omitempty"`
	// Evaluator is where the policies are evaluated.
	Evaluator Evaluator `json:"evaluator,omitempty"`
}

// EvaluatorIsolation is where the policies are evaluated.
type EvaluatorIsolation string

const (
	// IsolationProcess evaluates in child processes of the manager: the
	// manager ends one whose evaluation does not stop at its time limit
	// or whose memory passes its limit, and a Go fatal error in OPA ends
	// the child alone. The evaluation under way fails, with its policy's
	// enforcement action.
	IsolationProcess EvaluatorIsolation = "Process"
	// IsolationNone evaluates in the manager's own process, as inplacectl
	// does: a policy that overflows the Go stack ends the manager.
	IsolationNone EvaluatorIsolation = "None"
)

// Evaluator configures where the policies are evaluated.
type Evaluator struct {
	// Isolation is Process (default) or None.
	Isolation EvaluatorIsolation `json:"isolation,omitempty"`
	// Processes is how many evaluator processes run, each evaluating one
	// admission request or audited JobSet at a time. Default 2.
	Processes int `json:"processes,omitempty"`
	// MemoryLimit bounds each evaluator process's resident memory; past
	// it the process is ended and the evaluation it ran fails. It holds
	// the compiled policies and a copy of data.inventory: raise it with
	// policies.inventory.maxObjects. Default 256Mi.
	MemoryLimit *resource.Quantity `json:"memoryLimit,omitempty"`
}

// Inventory configures the objects the manager keeps in data.inventory, in
// Gatekeeper's shape: data.inventory.namespace[NS][GROUP/VERSION][KIND][NAME]
// and data.inventory.cluster[GROUP/VERSION][KIND][NAME].
type Inventory struct {
	// Sync lists the kinds to sync besides Namespaces (v1) and JobSets
	// (jobset.x-k8s.io/v1alpha2), which are always synced: the manager
	// reads them already. Each other kind needs list and watch in the
	// admission server's ClusterRole: the Helm chart grants them from this
	// list. Secrets, and the kinds the manager caches only in part (Pods,
	// Jobs, Services, ConfigMaps, PersistentVolumeClaims, Roles,
	// RoleBindings), are refused.
	Sync []SyncedKind `json:"sync,omitempty"`
	// MaxObjects bounds the objects held, all kinds together; past it,
	// objects are left out (inplace_policy_inventory_dropped_total counts
	// them) and the policies see an incomplete inventory. Default 20000.
	MaxObjects int `json:"maxObjects,omitempty"`
}

// SyncedKind is one kind the inventory holds.
type SyncedKind struct {
	// Group of the kind; empty for the core group.
	Group string `json:"group,omitempty"`
	// Version of the kind.
	Version string `json:"version"`
	// Kind, e.g. Namespace, ResourceQuota, LocalQueue.
	Kind string `json:"kind"`
	// Resource is the kind's resource name, for the Helm chart's RBAC
	// alone; default the kind in lower case and plural (localqueues).
	Resource string `json:"resource,omitempty"`
}

// LeaderElection configures leader election.
type LeaderElection struct {
	// LeaderElect enables leader election. Default true.
	LeaderElect *bool `json:"leaderElect,omitempty"`
	// ResourceName is the name of the Lease. Default inplace-manager.
	ResourceName string `json:"resourceName,omitempty"`
	// ResourceNamespace is the namespace of the Lease. Default: the
	// namespace the manager runs in.
	ResourceNamespace string `json:"resourceNamespace,omitempty"`
	// LeaseDuration, RenewDeadline and RetryPeriod as in client-go's leader
	// election. Defaults 15s, 10s, 2s.
	LeaseDuration *metav1.Duration `json:"leaseDuration,omitempty"`
	RenewDeadline *metav1.Duration `json:"renewDeadline,omitempty"`
	RetryPeriod   *metav1.Duration `json:"retryPeriod,omitempty"`
}

// Metrics configures the metrics endpoint.
type Metrics struct {
	// BindAddress of the metrics endpoint; "0" disables it. Default :8443.
	BindAddress string `json:"bindAddress,omitempty"`
	// Secure serves metrics over HTTPS with authentication and
	// authorization through the apiserver. Default true.
	Secure *bool `json:"secure,omitempty"`
}

// Health configures the probe endpoint.
type Health struct {
	// ProbeBindAddress of /healthz and /readyz. Default :8081.
	ProbeBindAddress string `json:"probeBindAddress,omitempty"`
}

// ClientConnection limits the client.
type ClientConnection struct {
	// QPS of requests to the apiserver. Default 500.
	QPS *float32 `json:"qps,omitempty"`
	// Burst of requests to the apiserver. Default 1000.
	Burst *int32 `json:"burst,omitempty"`
}

// Controller tunes the JobSet controller.
type Controller struct {
	// Disabled turns the JobSet controller off (the admission webhooks and
	// the policy engine alone).
	Disabled bool `json:"disabled,omitempty"`
	// MaxConcurrentReconciles is how many JobSets are reconciled at once.
	// Default 5.
	MaxConcurrentReconciles int `json:"maxConcurrentReconciles,omitempty"`
	// ChildParallelism bounds concurrent creations and deletions of one
	// JobSet's Jobs. Default 50.
	ChildParallelism int `json:"childParallelism,omitempty"`
	// InPlaceRestartTimeout is how long an in-place restart may take to
	// converge before the JobSet falls back to recreating its Jobs.
	// Default 5m.
	InPlaceRestartTimeout *metav1.Duration `json:"inPlaceRestartTimeout,omitempty"`
	// UpdateBatchPeriod is how long ordinary changes of a JobSet's Jobs and
	// Pods (counters, readiness, epochs reported) are gathered into one
	// reconcile; failures and deletions are reconciled at once. Longer
	// costs less CPU on large JobSets and delays an in-place restart's end
	// by up to as much. Default 100ms.
	UpdateBatchPeriod *metav1.Duration `json:"updateBatchPeriod,omitempty"`
	// FatalExitSettle is how long an in-place restart of a JobSet whose
	// Jobs have a podFailurePolicy FailJob or FailIndex rule waits for a
	// fatal exit to be reported, which then fails the Job instead: a
	// training program's peers exit the moment one rank does, and their
	// kubelets may report first. 0 turns the wait off. Default 2s; at
	// most 1m.
	FatalExitSettle *metav1.Duration `json:"fatalExitSettle,omitempty"`
	// UpstreamJobSet is where the manager looks for upstream JobSet's
	// controller, which must not run beside it.
	UpstreamJobSet UpstreamJobSet `json:"upstreamJobSet"`
}

// UpstreamJobSet is where upstream JobSet's controller would run. While
// it holds its Lease, or while the JobSet CRD would prune inplace's status
// fields (upstream's CRD), the JobSet controller reconciles no JobSet
// (docs/how-to/migrate-from-jobset.md).
type UpstreamJobSet struct {
	// Namespace upstream JobSet's controller runs and elects its leader
	// in. Default jobset-system, where its manifests install it; set the
	// namespace its Helm release went to.
	Namespace string `json:"namespace,omitempty"`
	// CheckInterval is how often the verdict is taken again from its
	// Leases and the JobSet CRD's metadata, which the manager watches
	// (the CRD itself is read only when it changed); a change seen by
	// the watches is acted on at once. The controller resumes at most
	// this long after the Lease lapses, which no write announces. A
	// reconcile that deletes reads them from the API server first.
	// Default 2s; from 100ms to 5m.
	CheckInterval *metav1.Duration `json:"checkInterval,omitempty"`
}

// Load reads a configuration file; an empty path gives the defaults.
func Load(path string) (*Configuration, error) {
	cfg := &Configuration{}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading configuration: %w", err)
		}
		if err := yaml.UnmarshalStrict(data, cfg); err != nil {
			return nil, fmt.Errorf("configuration %s: %w", path, err)
		}
		if cfg.APIVersion != APIVersion || cfg.Kind != Kind {
			return nil, fmt.Errorf("configuration %s: apiVersion/kind is %q/%q, want %q/%q", path, cfg.APIVersion, cfg.Kind, APIVersion, Kind)
		}
	}
	SetDefaults(cfg)
	if cfg.Controller.Disabled && cfg.Webhook.Disabled {
		return nil, fmt.Errorf("configuration %s: controller.disabled and webhook.disabled are both true: the manager would run nothing; enable one", path)
	}
	// The webhooks' timeout is 10s: a request's policies must be done
	// well within it, or the client gets the apiserver's timeout instead
	// of the policies' messages.
	switch evaluation, request := cfg.Policies.EvaluationTimeout.Duration, cfg.Policies.RequestTimeout.Duration; {
	case evaluation <= 0:
		return nil, fmt.Errorf("configuration %s: policies.evaluationTimeout is %v: set a positive duration (default 1s) or leave it out", path, evaluation)
	case request <= 0 || request > 8*time.Second:
		return nil, fmt.Errorf("configuration %s: policies.requestTimeout is %v: set a duration above 0 and at most 8s, within the webhooks' 10s timeout (default 5s), or leave it out", path, request)
	case evaluation > request:
		return nil, fmt.Errorf("configuration %s: policies.evaluationTimeout (%v) is above policies.requestTimeout (%v): lower it", path, evaluation, request)
	}
	for i, k := range cfg.Policies.Inventory.Sync {
		if k.Version == "" || k.Kind == "" {
			return nil, fmt.Errorf("configuration %s: policies.inventory.sync[%d]: version and kind are required, e.g. {group: kueue.x-k8s.io, version: v1beta1, kind: LocalQueue}", path, i)
		}
		if why, ok := unsyncable[k.Group+"/"+k.Kind]; ok {
			return nil, fmt.Errorf("configuration %s: policies.inventory.sync[%d]: %s cannot be synced: %s", path, i, k.Kind, why)
		}
	}
	switch ev := cfg.Policies.Evaluator; {
	case ev.Isolation != IsolationProcess && ev.Isolation != IsolationNone:
		return nil, fmt.Errorf("configuration %s: policies.evaluator.isolation is %q: use Process (the default) or None", path, ev.Isolation)
	case ev.Processes < 1 || ev.Processes > 64:
		return nil, fmt.Errorf("configuration %s: policies.evaluator.processes is %d: set from 1 to 64 (default 2), or leave it out", path, ev.Processes)
	case ev.MemoryLimit.CmpInt64(64<<20) < 0:
		return nil, fmt.Errorf("configuration %s: policies.evaluator.memoryLimit is %s: set at least 64Mi, what an evaluator process holds before any policy (default 256Mi), or leave it out", path, ev.MemoryLimit)
	}
	if n := cfg.Policies.Inventory.MaxObjects; n < 0 {
		return nil, fmt.Errorf("configuration %s: policies.inventory.maxObjects is %d: set a positive number (default 20000) or leave it out", path, n)
	}
	if v := cfg.Agent.SupervisorVolume; v != SupervisorVolumeEmptyDir && v != SupervisorVolumeImage {
		return nil, fmt.Errorf("configuration %s: agent.supervisorVolume is %q: use EmptyDir (the default) or Image (every node mounts image volumes), or leave it out", path, v)
	}
	if cfg.Agent.Reports.Disabled && !*cfg.Agent.Reports.PodFallback {
		return nil, fmt.Errorf("configuration %s: agent.reports.disabled is true and agent.reports.podFallback false: agents would have no way to report; leave one of them out", path)
	}
	if n := cfg.Agent.Reports.TokenExpirationSeconds; n < 600 || n >= 1<<32 {
		return nil, fmt.Errorf("configuration %s: agent.reports.tokenExpirationSeconds is %d: set from 600, the least a projected token may live, to below 2^32, the most a Pod accepts (default 3600), or leave it out", path, n)
	}
	if _, _, err := net.SplitHostPort(cfg.Agent.Reports.BindAddress); err != nil {
		return nil, fmt.Errorf("configuration %s: agent.reports.bindAddress is %q: want host:port, e.g. :9445", path, cfg.Agent.Reports.BindAddress)
	}
	if a := cfg.Agent.Reports.AdvertiseAddress; a != "" {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("configuration %s: agent.reports.advertiseAddress is %q: want host:port that agents dial, e.g. 10.0.0.5:9445, or leave it out for POD_IP", path, a)
		}
	}
	if settle := cfg.Controller.FatalExitSettle.Duration; settle < 0 || settle > time.Minute {
		return nil, fmt.Errorf("configuration %s: controller.fatalExitSettle is %v: set a duration from 0 (off) to 1m (default 2s), or leave it out", path, settle)
	}
	if d := cfg.Controller.UpstreamJobSet.CheckInterval.Duration; d < 100*time.Millisecond || d > 5*time.Minute {
		return nil, fmt.Errorf("configuration %s: controller.upstreamJobSet.checkInterval is %v: set a duration from 100ms to 5m (default 2s), or leave it out", path, d)
	}
	return cfg, nil
}

// unsyncable are the kinds policies.inventory.sync refuses, by GROUP/KIND.
var unsyncable = map[string]string{
	"/Secret": "a policy's messages go back to the requester, and the admission server would need to read every Secret of the cluster",
	// The manager's cache holds only its own of these (controller.CacheOptions):
	// synced, they would give the policies a part of the cluster that
	// looks like the whole.
	"/Pod":                                  "the manager's cache holds only the Pods of JobSets",
	"/Service":                              "the manager's cache holds only the Services of JobSets",
	"/ConfigMap":                            "the manager's cache holds only the ConfigMaps of JobSets",
	"/PersistentVolumeClaim":                "the manager's cache holds only the claims of JobSets",
	"batch/Job":                             "the manager's cache holds only the Jobs of JobSets",
	"rbac.authorization.k8s.io/Role":        "the manager's cache holds only the Roles it makes",
	"rbac.authorization.k8s.io/RoleBinding": "the manager's cache holds only the RoleBindings it makes",
}

// SetDefaults fills every unset field.
func SetDefaults(cfg *Configuration) {
	cfg.APIVersion, cfg.Kind = APIVersion, Kind
	le := &cfg.LeaderElection
	if le.LeaderElect == nil {
		le.LeaderElect = ptr.To(true)
	}
	if le.ResourceName == "" {
		le.ResourceName = "inplace-manager"
	}
	if le.LeaseDuration == nil {
		le.LeaseDuration = &metav1.Duration{Duration: 15 * time.Second}
	}
	if le.RenewDeadline == nil {
		le.RenewDeadline = &metav1.Duration{Duration: 10 * time.Second}
	}
	if le.RetryPeriod == nil {
		le.RetryPeriod = &metav1.Duration{Duration: 2 * time.Second}
	}
	if cfg.Metrics.BindAddress == "" {
		cfg.Metrics.BindAddress = ":8443"
	}
	if cfg.Metrics.Secure == nil {
		cfg.Metrics.Secure = ptr.To(true)
	}
	if cfg.Health.ProbeBindAddress == "" {
		cfg.Health.ProbeBindAddress = ":8081"
	}
	if cfg.ClientConnection.QPS == nil {
		cfg.ClientConnection.QPS = ptr.To[float32](500)
	}
	if cfg.ClientConnection.Burst == nil {
		cfg.ClientConnection.Burst = ptr.To[int32](1000)
	}
	if cfg.Controller.MaxConcurrentReconciles == 0 {
		cfg.Controller.MaxConcurrentReconciles = 5
	}
	if cfg.Controller.ChildParallelism == 0 {
		cfg.Controller.ChildParallelism = 50
	}
	if cfg.Controller.InPlaceRestartTimeout == nil {
		cfg.Controller.InPlaceRestartTimeout = &metav1.Duration{Duration: 5 * time.Minute}
	}
	if cfg.Controller.UpdateBatchPeriod == nil {
		cfg.Controller.UpdateBatchPeriod = &metav1.Duration{Duration: 100 * time.Millisecond}
	}
	if cfg.Controller.FatalExitSettle == nil {
		cfg.Controller.FatalExitSettle = &metav1.Duration{Duration: 2 * time.Second}
	}
	if cfg.Controller.UpstreamJobSet.Namespace == "" {
		cfg.Controller.UpstreamJobSet.Namespace = "jobset-system"
	}
	if cfg.Controller.UpstreamJobSet.CheckInterval == nil {
		cfg.Controller.UpstreamJobSet.CheckInterval = &metav1.Duration{Duration: 2 * time.Second}
	}
	a := &cfg.Agent
	if a.Image == "" {
		a.Image = "ghcr.io/inplace-dev/inplace-agent:latest"
	}
	if a.ContainerName == "" {
		a.ContainerName = "inplace-agent"
	}
	if a.SupervisorVolume == "" {
		a.SupervisorVolume = SupervisorVolumeEmptyDir
	}
	if a.RestartExitCode == 0 {
		a.RestartExitCode = 88
	}
	if a.BarrierPort == 0 {
		a.BarrierPort = 18080
	}
	if a.BarrierTimeoutSeconds == 0 {
		a.BarrierTimeoutSeconds = 86400
	}
	if a.Reports.Audience == "" {
		// protocol.ReportAudience, which this package may not import.
		a.Reports.Audience = "inplace.dev/agent-reports"
	}
	if a.Reports.TokenExpirationSeconds == 0 {
		a.Reports.TokenExpirationSeconds = 3600
	}
	if a.Reports.PodFallback == nil {
		a.Reports.PodFallback = ptr.To(true)
	}
	if a.Reports.BindAddress == "" {
		a.Reports.BindAddress = ":9445"
	}
	if a.Resources == nil {
		a.Resources = &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			// The agent idles but for a restart; 200m leaves it headroom
			// so that throttling never delays a barrier.
			Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		}
	}
	if cfg.Webhook.Port == 0 {
		cfg.Webhook.Port = 9443
	}
	if cfg.Webhook.CertDir == "" {
		cfg.Webhook.CertDir = "/tmp/k8s-webhook-server/serving-certs"
	}
	if cfg.Webhook.MutatingConfigurationName == "" {
		cfg.Webhook.MutatingConfigurationName = "inplace-mutating-webhook"
	}
	if cfg.Webhook.ValidatingConfigurationName == "" {
		cfg.Webhook.ValidatingConfigurationName = "inplace-validating-webhook"
	}
	if cfg.Policies.AuditInterval == nil {
		cfg.Policies.AuditInterval = &metav1.Duration{Duration: 60 * time.Second}
	}
	if cfg.Policies.EvaluationTimeout == nil {
		cfg.Policies.EvaluationTimeout = &metav1.Duration{Duration: time.Second}
	}
	if cfg.Policies.RequestTimeout == nil {
		cfg.Policies.RequestTimeout = &metav1.Duration{Duration: 5 * time.Second}
	}
	// Always Namespaces and JobSets, which the manager caches already:
	// syncing them costs no RBAC, and a list of more kinds adds to them.
	for _, k := range []SyncedKind{{Version: "v1", Kind: "Namespace"}, {Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: "JobSet"}} {
		if !slices.ContainsFunc(cfg.Policies.Inventory.Sync, func(s SyncedKind) bool { return s.Group == k.Group && s.Kind == k.Kind }) {
			cfg.Policies.Inventory.Sync = append(cfg.Policies.Inventory.Sync, k)
		}
	}
	if cfg.Policies.Inventory.MaxObjects == 0 {
		cfg.Policies.Inventory.MaxObjects = 20000
	}
	if cfg.Policies.Evaluator.Isolation == "" {
		cfg.Policies.Evaluator.Isolation = IsolationProcess
	}
	if cfg.Policies.Evaluator.Processes == 0 {
		cfg.Policies.Evaluator.Processes = 2
	}
	if cfg.Policies.Evaluator.MemoryLimit == nil {
		cfg.Policies.Evaluator.MemoryLimit = ptr.To(resource.MustParse("256Mi"))
	}
}
