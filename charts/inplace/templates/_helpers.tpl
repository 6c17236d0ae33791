{{/* An image of the chart, image being manager.image or agent.image:
its repository, under imageRegistry when that is set (the repository's
last element kept: make push REGISTRY=... pushes it there), and its tag or
the chart's appVersion. */}}
{{- define "inplace.image" -}}
{{- $repository := .image.repository -}}
{{- with .root.Values.imageRegistry -}}
{{- $repository = printf "%s/%s" . (splitList "/" $repository | last) -}}
{{- end -}}
{{- printf "%s:%s" $repository (.image.tag | default .root.Chart.AppVersion) -}}
{{- end }}

{{- define "inplace.labels" -}}
app.kubernetes.io/name: inplace
{{- end }}

{{/* The labels of one component: manager (the controller) or webhook. */}}
{{- define "inplace.selector" -}}
app.kubernetes.io/name: inplace
app.kubernetes.io/component: {{ . }}
{{- end }}

{{/* The manager's configuration file. */}}
{{- define "inplace.config" -}}
{{- $config := dict
  "apiVersion" "config.inplace.dev/v1alpha1"
  "kind" "Configuration"
  "leaderElection" (dict "leaderElect" true)
  "metrics" (dict "bindAddress" ":8443")
  "health" (dict "probeBindAddress" ":8081")
  "webhook" (dict "port" 9443 "certDir" "/tmp/k8s-webhook-server/serving-certs")
  "agent" (dict
    "image" (include "inplace.image" (dict "root" . "image" .Values.agent.image))
    "reports" (include "inplace.agentReports" . | fromYaml))
-}}
{{- if not .Values.certManager.enabled }}
{{- $_ := set $config.webhook "selfSignedCerts" true }}
{{- end }}
{{- mustMergeOverwrite $config .Values.config | toYaml }}
{{- end }}

{{/* agent.reports of the configuration file, from the chart's values: its
port is the controller's containerPort and the NetworkPolicy's, its
podFallback decides the agents' ClusterRole, so they are values of the
chart and not of config. */}}
{{- define "inplace.agentReports" -}}
{{- $r := .Values.agent.reports }}
{{- range $k := list "disabled" "audience" "tokenExpirationSeconds" "bindAddress" "podFallback" }}
{{- if hasKey ((($.Values.config).agent).reports | default dict) $k }}
{{- fail (printf "config.agent.reports.%s: set the chart's value agent.reports.%s instead, which also renders the controller's port, the NetworkPolicy and the agents' ClusterRole" $k (ternary "port" $k (eq $k "bindAddress"))) }}
{{- end }}
{{- end }}
{{- if and $r.disabled (not $r.podFallback) }}
{{- fail "agent.reports.podFallback=false needs direct reports: with agent.reports.disabled=true every agent writes its Pod, which the agents' ClusterRole would then not allow" }}
{{- end }}
disabled: {{ $r.disabled }}
audience: {{ $r.audience | quote }}
tokenExpirationSeconds: {{ int64 $r.tokenExpirationSeconds }}
bindAddress: {{ printf ":%d" (int $r.port) | quote }}
podFallback: {{ $r.podFallback }}
{{- end }}

{{/* A file of files/ (a copy of config/), in the release namespace. */}}
{{- define "inplace.file" -}}
{{- .root.Files.Get .file | replace "inplace-system" .root.Release.Namespace }}
{{- end }}
