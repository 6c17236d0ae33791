{{/* The replicas of one Deployment preferably on different nodes. */}}
{{- define "inplace.affinity" -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
  - weight: 100
    podAffinityTerm:
      topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          {{- include "inplace.selector" .component | nindent 10 }}
{{- end }}

{{/* One half of the manager: the JobSet controller, or the admission server. */}}
{{- define "inplace.deployment" -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "inplace.selector" .component | nindent 4 }}
spec:
  replicas: {{ .replicas }}
  {{- if and .webhook (not .root.Values.certManager.enabled) }}
  # Each replica writes its own CA into the webhook configurations as it
  # starts: the old one goes first.
  strategy:
    type: Recreate
  {{- end }}
  selector:
    matchLabels:
      {{- include "inplace.selector" .component | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "inplace.selector" .component | nindent 8 }}
      annotations:
        checksum/config: {{ include "inplace.config" .root | sha256sum }}
    spec:
      serviceAccountName: {{ .name }}
      {{- with .root.Values.manager.priorityClass.name }}
      priorityClassName: {{ . }}
      {{- end }}
      {{- with .root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      terminationGracePeriodSeconds: 10
      securityContext:
        runAsNonRoot: true
        seccompProfile:
          type: RuntimeDefault
      {{- with .root.Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .root.Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- /* The chart's podAntiAffinity spreads the replicas over nodes;
      each field of affinity is added to it, a podAntiAffinity replacing it. */}}
      {{- $affinity := include "inplace.affinity" . | fromYaml }}
      {{- range $k, $v := .root.Values.affinity }}
      {{- $_ := set $affinity $k $v }}
      {{- end }}
      affinity:
        {{- toYaml $affinity | nindent 8 }}
      containers:
      - name: manager
        image: {{ include "inplace.image" (dict "root" .root "image" .root.Values.manager.image) | quote }}
        imagePullPolicy: {{ .root.Values.manager.image.pullPolicy }}
        args:
        - --config=/etc/inplace/config.yaml
        - --role={{ .role }}
        {{- if not .webhook }}
        env:
        # The leader tells the agents to report to this Pod's own address
        # (agent.reports.advertiseAddress defaults to POD_IP and the port
        # of agent.reports.bindAddress): without it they write their Pods.
        - name: POD_IP
          valueFrom:
            fieldRef:
              fieldPath: status.podIP
        {{- end }}
        ports:
        {{- if .webhook }}
        - name: webhook
          containerPort: 9443
          protocol: TCP
        {{- else if not .root.Values.agent.reports.disabled }}
        # The agents' reports (agent.reports.bindAddress), which they send
        # to the leader's Pod IP directly: no Service.
        - name: agent-reports
          containerPort: {{ .root.Values.agent.reports.port }}
          protocol: TCP
        {{- end }}
        - name: metrics
          containerPort: 8443
          protocol: TCP
        - name: health
          containerPort: 8081
          protocol: TCP
        livenessProbe:
          httpGet:
            path: /healthz
            port: health
          initialDelaySeconds: 15
          periodSeconds: 20
        readinessProbe:
          httpGet:
            path: /readyz
            port: health
          periodSeconds: 5
        resources:
          {{- toYaml .root.Values.manager.resources | nindent 10 }}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities:
            drop: [ALL]
        volumeMounts:
        - name: config
          mountPath: /etc/inplace
          readOnly: true
        {{- if not .webhook }}
        {{- else if .root.Values.certManager.enabled }}
        - name: serving-cert
          mountPath: /tmp/k8s-webhook-server/serving-certs
          readOnly: true
        {{- else }}
        - name: serving-cert
          mountPath: /tmp/k8s-webhook-server/serving-certs
        {{- end }}
      volumes:
      - name: config
        configMap:
          name: inplace-manager-config
      {{- if not .webhook }}
      {{- else if .root.Values.certManager.enabled }}
      - name: serving-cert
        secret:
          secretName: inplace-webhook-server-cert
      {{- else }}
      - name: serving-cert
        emptyDir: {}
      {{- end }}
{{- if gt (int .replicas) 1 }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
spec:
  minAvailable: {{ .root.Values.manager.podDisruptionBudget.minAvailable }}
  {{- /* Unready replicas may always be evicted: every controller replica is unready while it holds back for upstream JobSet, which would block every drain. */}}
  unhealthyPodEvictionPolicy: AlwaysAllow
  selector:
    matchLabels:
      {{- include "inplace.selector" .component | nindent 6 }}
{{- end }}
{{- end }}
