{{/* Names: <release>-custody-<component>, cut to 63 characters. */}}
{{- define "custody.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "custody.name" -}}
{{- printf "%s-%s" (include "custody.fullname" .root) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "custody.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "custody.labels" -}}
{{ include "custody.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{- define "custody.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "custody.signerServiceAccount" -}}
{{- default (printf "%s-keyvault" (include "custody.fullname" .)) .Values.signer.serviceAccount.name -}}
{{- end -}}

{{/* The restricted Pod Security profile, for every pod of the chart. */}}
{{- define "custody.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "custody.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "custody.secretEnv" -}}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ .ref.existingSecret }}
      key: {{ .ref.key }}
{{- end -}}

{{/* Environment shared by the API and the worker. */}}
{{- define "custody.appEnv" -}}
- name: APP_ENV
  value: {{ .Values.appEnv | quote }}
- name: LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
- name: DATA_DIR
  value: /tmp/custody
{{ include "custody.secretEnv" (dict "name" "DATABASE_URL" "ref" .Values.database) }}
{{ include "custody.secretEnv" (dict "name" "DATA_ENCRYPTION_KEY" "ref" .Values.dataEncryptionKey) }}
{{ include "custody.secretEnv" (dict "name" "KEYVAULT_TOKEN" "ref" .Values.keyvaultToken) }}
- name: KEYVAULT_URL
  value: {{ printf "https://%s:%d" (include "custody.name" (dict "root" . "component" "keyvault")) (int .Values.signer.port) | quote }}
- name: KEYVAULT_CA_FILE
  value: /etc/custody/signer-tls/ca.crt
{{- if .Values.signer.tls.mutual }}
- name: KEYVAULT_CLIENT_CERT_FILE
  value: /etc/custody/signer-tls/tls.crt
- name: KEYVAULT_CLIENT_KEY_FILE
  value: /etc/custody/signer-tls/tls.key
{{- end }}
- name: WEBHOOK_RETRY_SCHEDULE
  value: {{ .Values.config.webhookRetrySchedule | quote }}
- name: WEBHOOK_TIMEOUT_MS
  value: {{ .Values.config.webhookTimeoutMs | quote }}
- name: WEBHOOK_ENDPOINT_CONCURRENCY
  value: {{ .Values.config.webhookEndpointConcurrency | quote }}
- name: EGRESS_ALLOW_PRIVATE
  value: {{ join "," .Values.config.egressAllowPrivate | quote }}
- name: RELAY_CONCURRENCY
  value: {{ .Values.config.relayConcurrency | quote }}
- name: SCHEDULER_INTERVAL_MS
  value: {{ .Values.config.schedulerIntervalMs | quote }}
- name: RATE_LIMIT_TOKEN
  value: {{ .Values.config.rateLimitToken | quote }}
- name: RATE_LIMIT_PROJECT
  value: {{ .Values.config.rateLimitProject | quote }}
- name: RATE_LIMIT_WINDOW_S
  value: {{ .Values.config.rateLimitWindowS | quote }}
{{- if .Values.redis.existingSecret }}
{{ include "custody.secretEnv" (dict "name" "REDIS_URL" "ref" (dict "existingSecret" .Values.redis.existingSecret "key" .Values.redis.key)) }}
{{- end }}
{{- if .Values.redis.keyPrefix }}
- name: REDIS_KEY_PREFIX
  value: {{ .Values.redis.keyPrefix | quote }}
{{- end }}
{{- if .Values.config.oidcCaSecret }}
- name: OIDC_CA_FILE
  value: /etc/custody/oidc-ca/ca.crt
{{- end }}
{{- end -}}

{{- define "custody.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end -}}

{{/* NetworkPolicy peers from { cidrs, namespaceSelector, podSelector }. */}}
{{- define "custody.peers" -}}
{{- range .cidrs }}
- ipBlock:
    cidr: {{ . }}
{{- end }}
{{- if or .namespaceSelector .podSelector }}
- {{- if .namespaceSelector }}
  namespaceSelector:
    {{- toYaml .namespaceSelector | nindent 4 }}
  {{- end }}
  {{- if .podSelector }}
  podSelector:
    {{- toYaml .podSelector | nindent 4 }}
  {{- end }}
{{- end }}
{{- end -}}


{{/* The Secrets holding the signer's server certificate and the API's client certificate (tls.crt, tls.key, ca.crt). */}}
{{- define "custody.signerTlsSecret" -}}
{{- if eq .Values.signer.tls.source "existingSecret" -}}
{{- .Values.signer.tls.existingSecret -}}
{{- else -}}
{{- printf "%s-tls" (include "custody.name" (dict "root" . "component" "keyvault")) -}}
{{- end -}}
{{- end -}}

{{- define "custody.signerClientTlsSecret" -}}
{{- if eq .Values.signer.tls.source "existingSecret" -}}
{{- .Values.signer.tls.clientExistingSecret -}}
{{- else -}}
{{- printf "%s-client-tls" (include "custody.name" (dict "root" . "component" "keyvault")) -}}
{{- end -}}
{{- end -}}

{{/* Volume and mount of the API's and the worker's view of the signer's TLS: its CA, and their client certificate. */}}
{{- define "custody.signerTlsClientVolume" -}}
- name: signer-tls
  secret:
    secretName: {{ if .Values.signer.tls.mutual }}{{ include "custody.signerClientTlsSecret" . }}{{ else }}{{ include "custody.signerTlsSecret" . }}{{ end }}
    {{- if not .Values.signer.tls.mutual }}
    items:
      - { key: ca.crt, path: ca.crt }
    {{- end }}
{{- end -}}

{{- define "custody.signerTlsClientMount" -}}
- name: signer-tls
  mountPath: /etc/custody/signer-tls
  readOnly: true
{{- end -}}
