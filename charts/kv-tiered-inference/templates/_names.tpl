{{/*
Names and labels: the release's full name, each model's object names, and the labels every object
carries (selector labels are name + instance only, so custom labels never touch immutable selectors).
*/}}

{{- define "kv-tiered-inference.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kv-tiered-inference.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Selector labels: name + instance only, so custom labels never touch immutable selectors. */}}
{{- define "kv-tiered-inference.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kv-tiered-inference.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kv-tiered-inference.labels" -}}
{{ include "kv-tiered-inference.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kv-tiered-inference
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one model's engine pods. Input: dict "root" $ "model" <models[] entry>. */}}
{{- define "kv-tiered-inference.engineSelectorLabels" -}}
{{ include "kv-tiered-inference.selectorLabels" .root }}
app.kubernetes.io/component: engine
kv-tiered-inference/model: {{ .model.name }}
{{- end -}}

{{/* Selector labels of one model's router pods. Input: dict "root" $ "model" <models[] entry>. */}}
{{- define "kv-tiered-inference.routerSelectorLabels" -}}
{{ include "kv-tiered-inference.selectorLabels" .root }}
app.kubernetes.io/component: router
kv-tiered-inference/model: {{ .model.name }}
{{- end -}}

{{/* Object names of one model. Input: dict "root" $ "model" <models[] entry>. */}}
{{- define "kv-tiered-inference.engineName" -}}
{{- printf "%s-%s" (include "kv-tiered-inference.fullname" .root) .model.name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kv-tiered-inference.routerName" -}}
{{- printf "%s-%s-router" (include "kv-tiered-inference.fullname" .root) .model.name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kv-tiered-inference.lmcacheConfigName" -}}
{{- printf "%s-%s-lmcache" (include "kv-tiered-inference.fullname" .root) .model.name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kv-tiered-inference.podscriptsName" -}}
{{- printf "%s-podscripts" (include "kv-tiered-inference.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The eviction CronJob and its ConfigMap: a CronJob name may not exceed 52 characters (its Jobs append a suffix).
*/}}
{{- define "kv-tiered-inference.l2EvictionName" -}}
{{- printf "%s-l2-eviction" (include "kv-tiered-inference.fullname" . | trunc 40 | trimSuffix "-") -}}
{{- end -}}
