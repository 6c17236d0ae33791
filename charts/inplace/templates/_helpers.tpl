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
  "agent" (dict "image" (printf "%s:%s" .Values.agent.image.repository (.Values.agent.image.tag | default .Chart.AppVersion)))
-}}
{{- if not .Values.certManager.enabled }}
{{- $_ := set $config.webhook "selfSignedCerts" true }}
{{- end }}
{{- mustMergeOverwrite $config .Values.config | toYaml }}
{{- end }}

{{/* A file of files/ (a copy of config/), in the release namespace. */}}
{{- define "inplace.file" -}}
{{- .root.Files.Get .file | replace "inplace-system" .root.Release.Namespace }}
{{- end }}
