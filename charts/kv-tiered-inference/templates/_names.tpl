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
app.kubernetes.io/name: {{ include "kv-tiered-inference.name" . | quote }}
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

{{/*
A name that keeps its suffix at any length: the base is cut first (and a trailing "-" dropped), then the
suffix is appended, so a long release name never cuts off "-router" or makes two objects' names equal.
Input: dict "base" <prefix> "suffix" <"-..."> "max" <the kind's name limit>.
*/}}
{{- define "kv-tiered-inference.suffixedName" -}}
{{- printf "%s%s" (.base | trunc (max 1 (sub (int .max) (len .suffix)) | int) | trimSuffix "-") .suffix -}}
{{- end -}}

{{/*
Object names of one model: <fullname>-<model>[-<suffix>]. Input: dict "root" $ "model" <models[] entry>.
The engine is a StatefulSet under kvaware (_router.tpl, kvStatic), whose name may have 52 characters: its
pods carry a controller-revision-hash label of the name plus a hash (<= 63).
*/}}
{{- define "kv-tiered-inference.engineName" -}}
{{- $max := ternary 52 63 (eq (include "kv-tiered-inference.kvStatic" .root) "true") -}}
{{- include "kv-tiered-inference.suffixedName" (dict "base" (include "kv-tiered-inference.fullname" .root) "suffix" (printf "-%s" .model.name) "max" $max) -}}
{{- end -}}

{{- define "kv-tiered-inference.routerName" -}}
{{- include "kv-tiered-inference.suffixedName" (dict "base" (include "kv-tiered-inference.fullname" .root) "suffix" (printf "-%s-router" .model.name) "max" 63) -}}
{{- end -}}

{{/* The in-cluster Service of an exposed router's metrics port (router-service.yaml). */}}
{{- define "kv-tiered-inference.routerMetricsName" -}}
{{- include "kv-tiered-inference.suffixedName" (dict "base" (include "kv-tiered-inference.fullname" .root) "suffix" (printf "-%s-router-metrics" .model.name) "max" 63) -}}
{{- end -}}

{{- define "kv-tiered-inference.lmcacheConfigName" -}}
{{- include "kv-tiered-inference.suffixedName" (dict "base" (include "kv-tiered-inference.fullname" .root) "suffix" (printf "-%s-lmcache" .model.name) "max" 63) -}}
{{- end -}}

{{- define "kv-tiered-inference.podscriptsName" -}}
{{- include "kv-tiered-inference.suffixedName" (dict "base" (include "kv-tiered-inference.fullname" .) "suffix" "-podscripts" "max" 63) -}}
{{- end -}}

{{/*
The eviction CronJob and its ConfigMap: a CronJob name may not exceed 52 characters (its Jobs append a suffix).
*/}}
{{- define "kv-tiered-inference.l2EvictionName" -}}
{{- include "kv-tiered-inference.suffixedName" (dict "base" (include "kv-tiered-inference.fullname" .) "suffix" "-l2-eviction" "max" 52) -}}
{{- end -}}

{{/*
The API-key env var (auth.apiKeySecret) of engines, routers and test pods, as a list item; empty when no
Secret is named. Input: root.
*/}}
{{- define "kv-tiered-inference.apiKeyEnv" -}}
{{- with .Values.auth.apiKeySecret.name }}
- name: VLLM_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ . | quote }}
      key: {{ $.Values.auth.apiKeySecret.key | quote }}
{{- end }}
{{- end -}}
