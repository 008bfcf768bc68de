{{- define "gpu-triage.fullname" -}}
{{- printf "%s" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpu-triage.labels" -}}
app.kubernetes.io/name: gpu-triage
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "gpu-triage.selector" -}}
app.kubernetes.io/name: gpu-triage
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
