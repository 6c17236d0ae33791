package inject

import (
	"path"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	"github.com/inplace-dev/inplace/api/protocol"
)

// ReportTokenVolume is the projected volume that holds the agent's token
// for its reports to the controller.
const ReportTokenVolume = "inplace-agent-report-token"

// AgentStateVolume is the emptyDir, mounted into the agent alone, where
// it keeps the report endpoint while its Pod's containers restart in
// place: started again, it follows its broadcast from the leader instead
// of watching it.
const AgentStateVolume = "inplace-agent-state"

// agentStateLimit bounds the state volume: the endpoint is a few KB.
const agentStateLimit = "1Mi"

// injectReportToken gives the Pod's agent (at index a of its init
// containers) a projected service-account token for the controller's
// audience, bound to the Pod and refreshed by the kubelet, and tells the
// agent where it is: the agent then reports to the controller's leader
// directly (docs/explanation/agent-reports.md). Idempotent.
func injectReportToken(pod *corev1.PodSpec, a int, reports configv1alpha1.AgentReports) {
	if reports.Disabled {
		return
	}
	if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == ReportTokenVolume }) {
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: ReportTokenVolume, VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{
				DefaultMode: ptr.To[int32](0o444),
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
					Audience:          reports.Audience,
					ExpirationSeconds: ptr.To(reports.TokenExpirationSeconds),
					Path:              protocol.ReportTokenFile,
				}}},
			},
		}})
	}
	ag := &pod.InitContainers[a]
	if !slices.ContainsFunc(ag.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == ReportTokenVolume }) {
		ag.VolumeMounts = append(ag.VolumeMounts, corev1.VolumeMount{Name: ReportTokenVolume, MountPath: protocol.ReportTokenDir, ReadOnly: true})
	}
	setEnv(ag, corev1.EnvVar{Name: protocol.EnvReportTokenPath, Value: path.Join(protocol.ReportTokenDir, protocol.ReportTokenFile)})
	// This emptyDir, whatever a volume of its name said before: the state
	// must go with the Pod, or a Pod made again would start from its
	// predecessor's, and it is the agent's alone.
	state := corev1.Volume{Name: AgentStateVolume, VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse(agentStateLimit))},
	}}
	if v := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == AgentStateVolume }); v < 0 {
		pod.Volumes = append(pod.Volumes, state)
	} else {
		pod.Volumes[v] = state
	}
	if !slices.ContainsFunc(ag.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == AgentStateVolume }) {
		ag.VolumeMounts = append(ag.VolumeMounts, corev1.VolumeMount{Name: AgentStateVolume, MountPath: protocol.AgentStateDir})
	}
	setEnv(ag, corev1.EnvVar{Name: protocol.EnvAgentStateDir, Value: protocol.AgentStateDir})
	if !ptr.Deref(reports.PodFallback, true) {
		setEnv(ag, corev1.EnvVar{Name: protocol.EnvReportPodFallback, Value: "false"})
	}
}
