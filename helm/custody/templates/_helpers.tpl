{{/* The chart's name, or nameOverride. */}}
{{- define "custody.chartName" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{/* Names: fullnameOverride, or <release>-<chart name> (the release alone when it already holds it); cut to 50 so components fit 63. */}}
{{- define "custody.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "custody.chartName" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "custody.name" -}}
{{- printf "%s-%s" (include "custody.fullname" .root) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "custody.selectorLabels" -}}
app.kubernetes.io/name: {{ include "custody.chartName" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "custody.labels" -}}
{{ include "custody.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: custody
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* metadata of a namespaced resource: name, namespace, labels. */}}
{{- define "custody.metadata" -}}
name: {{ include "custody.name" . }}
namespace: {{ .root.Release.Namespace }}
labels:
  {{- include "custody.labels" . | nindent 2 }}
{{- end -}}

{{/* repository:tag, or repository@digest when a digest is given (the tag then only documents). */}}
{{- define "custody.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "custody.signerServiceAccount" -}}
{{- default (include "custody.name" (dict "root" . "component" "keyvault")) .Values.signer.serviceAccount.name -}}
{{- end -}}

{{/* The restricted Pod Security profile for every pod, with podSecurityContext merged over it; `openshift` leaves the user and group ids to the platform. */}}
{{- define "custody.podSecurityContext" -}}
{{- $ctx := dict "runAsNonRoot" true "seccompProfile" (dict "type" "RuntimeDefault") -}}
{{- if not .Values.openshift -}}
{{- $_ := set $ctx "runAsUser" 10001 -}}
{{- $_ := set $ctx "runAsGroup" 10001 -}}
{{- $_ := set $ctx "fsGroup" 10001 -}}
{{- end -}}
{{- toYaml (mergeOverwrite $ctx (deepCopy .Values.podSecurityContext)) -}}
{{- end -}}

{{- define "custody.containerSecurityContext" -}}
{{- $ctx := dict "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true "runAsNonRoot" true "capabilities" (dict "drop" (list "ALL")) "seccompProfile" (dict "type" "RuntimeDefault") -}}
{{- toYaml (mergeOverwrite $ctx (deepCopy .Values.containerSecurityContext)) -}}
{{- end -}}

{{/*
The pod template's metadata and the settings every pod shares: labels (podLabels), annotations
(podAnnotations), the security context, pull secrets, priority class, scheduling. `.values` is
the component's block of values (api, worker, signer, migrations).
*/}}
{{- define "custody.podMetadata" -}}
labels:
  {{- include "custody.labels" . | nindent 2 }}
  {{- with (merge (deepCopy (default dict .values.podLabels)) (deepCopy .root.Values.podLabels)) }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- $annotations := merge (deepCopy (default dict .values.podAnnotations)) (deepCopy .root.Values.podAnnotations) -}}
{{- /* Pods that use the generated signer TLS restart when it changes (it is made anew on every render where Helm cannot look up the cluster). */ -}}
{{- if and (has .component (list "api" "worker" "keyvault")) (eq .root.Values.signer.tls.source "generate") -}}
{{- $_ := set $annotations "checksum/signer-tls" (include "custody.signerTlsGenerated" .root | sha256sum) -}}
{{- end }}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
The signer's generated TLS (signer.tls.source generate) as JSON { server, client } of Secret data:
kept from the cluster when Helm can look the Secrets up, otherwise made here. Made once per render
and kept in the values map, so the Secrets and the pods' checksum annotation see the same bytes.
*/}}
{{- define "custody.signerTlsGenerated" -}}
{{- if not (hasKey .Values "_custodySignerTlsGenerated") -}}
{{- $svc := include "custody.name" (dict "root" . "component" "keyvault") -}}
{{- $ns := .Release.Namespace -}}
{{- $names := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) -}}
{{- $server := lookup "v1" "Secret" $ns (include "custody.signerTlsSecret" .) -}}
{{- $client := lookup "v1" "Secret" $ns (include "custody.signerClientTlsSecret" .) -}}
{{- $kept := dict -}}
{{- if and $server $server.data $client $client.data -}}
{{- $kept = dict "server" $server.data "client" $client.data -}}
{{- else -}}
{{- $ca := genCA (printf "%s-ca" $svc) 3650 -}}
{{- $cert := genSignedCert $svc nil $names 3650 $ca -}}
{{- $clientCert := genSignedCert (printf "%s-client" (include "custody.fullname" .)) nil nil 3650 $ca -}}
{{- $kept = dict "server" (dict "tls.crt" ($cert.Cert | b64enc) "tls.key" ($cert.Key | b64enc) "ca.crt" ($ca.Cert | b64enc)) "client" (dict "tls.crt" ($clientCert.Cert | b64enc) "tls.key" ($clientCert.Key | b64enc) "ca.crt" ($ca.Cert | b64enc)) -}}
{{- end -}}
{{- $_ := set .Values "_custodySignerTlsGenerated" $kept -}}
{{- end -}}
{{- toJson (get .Values "_custodySignerTlsGenerated") -}}
{{- end -}}

{{- define "custody.podCommon" -}}
# No Docker-link variables of the namespace's Services: nothing reads them, and a Service's name must never become a setting.
enableServiceLinks: false
securityContext:
  {{- include "custody.podSecurityContext" .root | nindent 2 }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (default .root.Values.priorityClassName .values.priorityClassName) }}
priorityClassName: {{ . }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if .values.affinity }}
affinity:
  {{- toYaml .values.affinity | nindent 2 }}
{{- else if hasKey .values "topologySpreadConstraints" }}
# Soft by default: replicas on different nodes when the scheduler can, never a refusal to schedule.
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "custody.selectorLabels" . | nindent 14 }}
{{- end }}
{{- if hasKey .values "topologySpreadConstraints" }}
topologySpreadConstraints:
  {{- if .values.topologySpreadConstraints }}
  {{- toYaml .values.topologySpreadConstraints | nindent 2 }}
  {{- else }}
  {{- /* Soft by default: spread over zones when the scheduler can, never refuse to schedule. */}}
  {{- range list "topology.kubernetes.io/zone" }}
  - maxSkew: 1
    topologyKey: {{ . }}
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- include "custody.selectorLabels" $ | nindent 8 }}
  {{- end }}
  {{- end }}
{{- end }}
{{- end -}}

{{/* extraEnv, extraVolumes or extraVolumeMounts (`.key`): every component's entries, then the component's own. */}}
{{- define "custody.extras" -}}
{{- with concat (get .root.Values .key) (default list (get .values .key)) }}
{{- toYaml . }}
{{- end }}
{{- end -}}

{{- define "custody.extraEnv" -}}
{{- include "custody.extras" (merge (dict "key" "extraEnv") .) -}}
{{- end -}}

{{- define "custody.extraVolumeMounts" -}}
{{- include "custody.extras" (merge (dict "key" "extraVolumeMounts") .) -}}
{{- end -}}

{{- define "custody.extraVolumes" -}}
{{- include "custody.extras" (merge (dict "key" "extraVolumes") .) -}}
{{- end -}}

{{/* A probe: the chart's default with the values' override merged over it. */}}
{{- define "custody.probe" -}}
{{- toYaml (mergeOverwrite (deepCopy .default) (deepCopy (default dict .override))) -}}
{{- end -}}

{{/*
Secrets: by default mounted as files (a projected volume of the named Secrets' keys) and read
through NAME_FILE; with secretsAsFiles false, as environment variables from the Secrets.
`.secrets` is a list of (dict "name" ENV "ref" (dict "existingSecret" … "key" …)).
*/}}
{{- define "custody.secretEnv" -}}
{{- range .secrets }}
{{- if $.root.Values.secretsAsFiles }}
- name: {{ .name }}_FILE
  value: /etc/custody/secrets/{{ .name }}
{{- else }}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ .ref.existingSecret }}
      key: {{ .ref.key }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "custody.secretVolume" -}}
{{- if .root.Values.secretsAsFiles }}
- name: secrets
  projected:
    defaultMode: 0440
    sources:
      {{- range .secrets }}
      - secret:
          name: {{ .ref.existingSecret }}
          items:
            - key: {{ .ref.key }}
              path: {{ .name }}
      {{- end }}
{{- end }}
{{- end -}}

{{- define "custody.secretMount" -}}
{{- if .root.Values.secretsAsFiles }}
- name: secrets
  mountPath: /etc/custody/secrets
  readOnly: true
{{- end }}
{{- end -}}

{{/* The secrets of the API (operator token too) and the worker. */}}
{{- define "custody.appSecrets" -}}
{{- $s := list (dict "name" "DATABASE_URL" "ref" .root.Values.database) (dict "name" "DATA_ENCRYPTION_KEY" "ref" .root.Values.dataEncryptionKey) (dict "name" "KEYVAULT_TOKEN" "ref" .root.Values.keyvaultToken) -}}
{{- if .operator }}{{ $s = append $s (dict "name" "OPERATOR_TOKEN" "ref" .root.Values.operatorToken) }}{{ end -}}
{{- if .root.Values.dataEncryptionKey.decryptionKeysKey }}{{ $s = append $s (dict "name" "DATA_DECRYPTION_KEYS" "ref" (dict "existingSecret" .root.Values.dataEncryptionKey.existingSecret "key" .root.Values.dataEncryptionKey.decryptionKeysKey)) }}{{ end -}}
{{- if .root.Values.redis.existingSecret }}{{ $s = append $s (dict "name" "REDIS_URL" "ref" (dict "existingSecret" .root.Values.redis.existingSecret "key" .root.Values.redis.key)) }}{{ end -}}
{{- if .root.Values.chains.existingSecret }}{{ $s = append $s (dict "name" "CHAINS" "ref" (dict "existingSecret" .root.Values.chains.existingSecret "key" .root.Values.chains.key)) }}{{ end -}}
{{- toJson $s -}}
{{- end -}}

{{- define "custody.signerSecrets" -}}
{{- $v := .Values.signer.vault -}}
{{- $t := .Values.keyvaultToken -}}
{{- $s := list (dict "name" "KEYVAULT_TOKEN" "ref" (dict "existingSecret" $t.existingSecret "key" (default $t.key $t.signerKey))) -}}
{{- if $t.previousKey }}{{ $s = append $s (dict "name" "KEYVAULT_TOKEN_PREVIOUS" "ref" (dict "existingSecret" $t.existingSecret "key" $t.previousKey)) }}{{ end -}}
{{- if eq $v.auth "approle" -}}
{{- $s = append $s (dict "name" "VAULT_ROLE_ID" "ref" (dict "existingSecret" $v.approle.existingSecret "key" $v.approle.roleIdKey)) -}}
{{- $s = append $s (dict "name" "VAULT_SECRET_ID" "ref" (dict "existingSecret" $v.approle.existingSecret "key" $v.approle.secretIdKey)) -}}
{{- end -}}
{{- toJson $s -}}
{{- end -}}

{{/* Environment shared by the API and the worker (secrets apart). */}}
{{- define "custody.appEnv" -}}
- name: APP_ENV
  value: {{ .Values.appEnv | quote }}
- name: LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
- name: DATA_DIR
  value: /tmp/custody
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
- name: WEBHOOK_HOST_CONCURRENCY
  value: {{ .Values.config.webhookHostConcurrency | quote }}
- name: WEBHOOK_SUBSCRIPTIONS_PER_PROJECT
  value: {{ .Values.config.webhookSubscriptionsPerProject | quote }}
- name: WEBHOOK_BACKLOG_PER_SUBSCRIPTION
  value: {{ .Values.config.webhookBacklogPerSubscription | quote }}
- name: EGRESS_ALLOW_PRIVATE
  value: {{ join "," .Values.config.egressAllowPrivate | quote }}
- name: RELAY_CONCURRENCY
  value: {{ .Values.config.relayConcurrency | quote }}
- name: RELAY_PROJECT_CONCURRENCY
  value: {{ .Values.config.relayProjectConcurrency | quote }}
- name: SCHEDULER_INTERVAL_MS
  value: {{ .Values.config.schedulerIntervalMs | quote }}
- name: RATE_LIMIT_TOKEN
  value: {{ .Values.config.rateLimitToken | quote }}
- name: RATE_LIMIT_PROJECT
  value: {{ .Values.config.rateLimitProject | quote }}
- name: RATE_LIMIT_WINDOW_S
  value: {{ .Values.config.rateLimitWindowS | quote }}
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

{{/* An egress rule to { cidrs, selectors, port }; without a location, the port to any address. */}}
{{- define "custody.egressTo" -}}
- {{- if or .cidrs .namespaceSelector .podSelector }}
  to:
    {{- include "custody.peers" . | nindent 4 }}
  {{- end }}
  ports:
    - port: {{ .port }}
      protocol: TCP
{{- end -}}

{{/* A PodDisruptionBudget that never blocks a drain: maxUnavailable (default 1), none for a single replica. */}}
{{- define "custody.pdb" -}}
{{- if and .values.podDisruptionBudget.enabled (gt (int .replicas) 1) }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  {{- include "custody.metadata" . | nindent 2 }}
spec:
  maxUnavailable: {{ .values.podDisruptionBudget.maxUnavailable }}
  # A pod that never became ready may be evicted: a broken rollout must not block node drains.
  unhealthyPodEvictionPolicy: AlwaysAllow
  selector:
    matchLabels:
      {{- include "custody.selectorLabels" . | nindent 6 }}
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
    defaultMode: 0440
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
