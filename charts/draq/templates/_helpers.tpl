{{/* Name of the chart's objects: the release name, with "draq" added unless it is in it. */}}
{{- define "draq.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains "draq" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-draq" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "draq.selectorLabels" -}}
app.kubernetes.io/name: draq
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "draq.labels" -}}
{{ include "draq.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* draq's own identity: the only user that may remove the admission gate (the webhooks' `not-draq`). */}}
{{- define "draq.user" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ .Values.serviceAccount.name }}
{{- end -}}

{{- define "draq.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ $tag }}
{{- end -}}
{{- end -}}

{{/* The serving certificate cert-manager issues (certificates.mode: cert-manager). */}}
{{- define "draq.servingCertificate" -}}
{{ include "draq.fullname" . }}-webhook
{{- end -}}

{{- define "draq.servingSecret" -}}
{{ include "draq.fullname" . }}-webhook-tls
{{- end -}}

{{/* Combinations the chart refuses, with what to do instead. */}}
{{- define "draq.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) -}}
{{- fail "replicaCount > 1 needs leaderElection.enabled: only the Lease holder may run admission cycles" -}}
{{- end -}}
{{- if and (eq .Values.webhook.configurations "chart") (ne .Values.certificates.mode "cert-manager") -}}
{{- fail "webhook.configurations=chart needs certificates.mode=cert-manager: the chart cannot know draq's own CA (use webhook.configurations=draq, or cert-manager's CA injector)" -}}
{{- end -}}
{{- with .Values.webhook.clientAuth.mtls -}}
{{- if and .enabled (eq (empty .caSecret) (empty .caConfigMap)) -}}
{{- fail "webhook.clientAuth.mtls.enabled needs exactly one of webhook.clientAuth.mtls.caSecret and caConfigMap: where the CA of the API server's client certificate is" -}}
{{- end -}}
{{- end -}}
{{- if and .Values.webhook.clientAuth.token.enabled (not .Values.webhook.clientAuth.token.secretName) -}}
{{- fail "webhook.clientAuth.token.enabled needs webhook.clientAuth.token.secretName: the Secret with the accepted tokens, one a line" -}}
{{- end -}}
{{- end -}}
