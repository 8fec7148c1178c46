{{/* The release's full name: the release name, with the chart's name appended unless it holds it. */}}
{{- define "kafka-s3-archiver.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kafka-s3-archiver.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kafka-s3-archiver.labels" -}}
{{ include "kafka-s3-archiver.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "kafka-s3-archiver.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kafka-s3-archiver.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret whose keys become environment variables: the release's own, a user's, or none. */}}
{{- define "kafka-s3-archiver.secretName" -}}
{{- if .Values.existingSecret -}}
{{- .Values.existingSecret -}}
{{- else if .Values.secretEnv -}}
{{- include "kafka-s3-archiver.fullname" . -}}
{{- end -}}
{{- end -}}

{{/*
Helm reads every number in the values as a float, which TOML would print as 100000.0 and the archiver
would refuse for an integer setting: whole numbers become integers again, in place, at every depth.
*/}}
{{- define "kafka-s3-archiver.wholeNumbers" -}}
{{- range $key, $value := . -}}
{{- if kindIs "float64" $value -}}
{{- if eq (float64 (int64 $value)) $value -}}
{{- $_ := set $ $key (int64 $value) -}}
{{- end -}}
{{- else if kindIs "map" $value -}}
{{- include "kafka-s3-archiver.wholeNumbers" $value -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The archiver's TOML file: .Values.config with the settings the chart owns; librdkafka's settings (the
[kafka] table) are strings to the archiver, so numbers and booleans there are written as text.
*/}}
{{- define "kafka-s3-archiver.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- range $key, $from := dict "metrics-addr" "metrics.port" "spool-dir" "spool" "max-spool-bytes" "spool.maxMiB" "max-buffer-bytes" "maxBufferMiB" "revoke-timeout" "revokeTimeoutSeconds" -}}
{{- if hasKey $config $key -}}
{{- fail (printf "config.%s is set by the chart: set %s instead (the pod's port, volume, memory or grace period follow it)" $key $from) -}}
{{- end -}}
{{- end -}}
{{- range $key := list "brokers" "group" "dest" -}}
{{- if not (get $config $key) -}}
{{- fail (printf "config.%s is required: the archiver has no default for it" $key) -}}
{{- end -}}
{{- end -}}
{{- include "kafka-s3-archiver.wholeNumbers" $config -}}
{{- range $key, $value := $config.kafka -}}
{{- $_ := set $config.kafka $key (toString $value) -}}
{{- end -}}
{{- $_ := set $config "metrics-addr" (printf "0.0.0.0:%d" (int .Values.metrics.port)) -}}
{{- $_ := set $config "spool-dir" "/spool" -}}
{{- $_ := set $config "max-spool-bytes" (printf "%dMiB" (int .Values.spool.maxMiB)) -}}
{{- $_ := set $config "max-buffer-bytes" (printf "%dMiB" (int .Values.maxBufferMiB)) -}}
{{- $_ := set $config "revoke-timeout" (printf "%ds" (int .Values.revokeTimeoutSeconds)) -}}
{{- toToml $config -}}
{{- end -}}

{{/*
The pod's memory request in MiB: the buffer budget, twice librdkafka's prefetch queue setting (a quarter
of the budget, 1 to 64 MiB, as the archiver sets it; librdkafka holds about twice its setting, measured in
docs/performance.md) and 96 MiB for the rest.
*/}}
{{- define "kafka-s3-archiver.memoryRequestMiB" -}}
{{- $budget := int .Values.maxBufferMiB -}}
{{- $queue := max 1 (min 64 (div $budget 4)) -}}
{{- add $budget (mul 2 $queue) 96 -}}
{{- end -}}
