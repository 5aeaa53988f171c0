{{/* The base name of every object: the release name, with -cubicle unless it already says cubicle. */}}
{{- define "cubicle.fullname" -}}
{{- if contains "cubicle" .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-cubicle" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels that pick the server pods (Deployment, Services, NetworkPolicies). */}}
{{- define "cubicle.serverSelector" -}}
app.kubernetes.io/name: cubicle
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
{{- end -}}

{{/* Labels of every object. */}}
{{- define "cubicle.labels" -}}
app.kubernetes.io/name: cubicle
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "cubicle.keysSecret" -}}
{{- if .Values.keys.mcpApiKey -}}
{{- printf "%s-keys" (include "cubicle.fullname" .) -}}
{{- else -}}
{{- required "keys.existingSecret or keys.mcpApiKey must be set" .Values.keys.existingSecret -}}
{{- end -}}
{{- end -}}
