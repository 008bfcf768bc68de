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

{{- /* The incident database must survive where it is kept: refuse what would lose it or
cannot write it, with the line that says what to set. */ -}}
{{- define "gpu-triage.checkDatabase" -}}
{{- $db := .Values.database.type -}}
{{- if not (has $db (list "postgresql" "sqlite")) -}}
{{- fail (printf "database.type must be postgresql or sqlite, not %q" $db) -}}
{{- end -}}
{{- if eq $db "sqlite" -}}
{{- if and .Values.securityContext.readOnlyRootFilesystem (not .Values.persistence.enabled) -}}
{{- fail "database.type=sqlite needs persistence.enabled=true: the root filesystem is read-only, so the SQLite file has nowhere to live (or use PostgreSQL: database.type=postgresql and DATABASE_URL in the Secret)" -}}
{{- end -}}
{{- if or (gt (int .Values.replicaCount) 1) .Values.shards -}}
{{- fail "database.type=sqlite serves one replica: several replicas share commands and incidents through PostgreSQL (database.type=postgresql and DATABASE_URL in the Secret)" -}}
{{- end -}}
{{- end -}}
{{- end -}}
