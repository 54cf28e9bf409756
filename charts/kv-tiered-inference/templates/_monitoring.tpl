{{/*
What the alerts and the dashboard match series by. Engine series (vLLM's /metrics through the PodMonitor)
carry `model_name` = the served model name; router series come through the router ServiceMonitor, whose
targets carry `service`; Curvine's come through its own ServiceMonitor. Regexes are PromQL raw strings
(backquotes), so model names need no escaping beyond regexQuoteMeta.
*/}}

{{/* `,<extraSelector>` or nothing. */}}
{{- define "kv-tiered-inference.alertExtraSelector" -}}
{{- with .Values.metrics.prometheusRule.extraSelector -}},{{ . }}{{- end -}}
{{- end -}}

{{- define "kv-tiered-inference.engineSeries" -}}
{{- $names := list -}}
{{- range .Values.models -}}{{- $names = append $names (regexQuoteMeta .model) -}}{{- end -}}
namespace="{{ .Release.Namespace }}",model_name=~`{{ $names | uniq | join "|" }}`{{ include "kv-tiered-inference.alertExtraSelector" . }}
{{- end -}}

{{/*
The label that marks the one Service per router that serves its metrics port (router-service.yaml) and
that the router ServiceMonitor selects.
*/}}
{{- define "kv-tiered-inference.routerMetricsLabel" -}}
kv-tiered-inference/metrics: router
{{- end -}}

{{/* That Service's name: the router Service while it is ClusterIP, else <router>-metrics. Input: dict "root" $ "model" <models[] entry>. */}}
{{- define "kv-tiered-inference.routerMetricsService" -}}
{{- if eq .root.Values.router.service.type "ClusterIP" -}}
{{- include "kv-tiered-inference.routerName" . -}}
{{- else -}}
{{- include "kv-tiered-inference.routerMetricsName" . -}}
{{- end -}}
{{- end -}}

{{- define "kv-tiered-inference.routerSeries" -}}
{{- $names := list -}}
{{- range .Values.models -}}{{- $names = append $names (include "kv-tiered-inference.routerMetricsService" (dict "root" $ "model" .)) -}}{{- end -}}
namespace="{{ .Release.Namespace }}",service=~`{{ $names | join "|" }}`{{ include "kv-tiered-inference.alertExtraSelector" . }}
{{- end -}}

{{/* The eviction CronJob's kube-state-metrics series. */}}
{{- define "kv-tiered-inference.evictionSeries" -}}
namespace="{{ .Release.Namespace }}",cronjob="{{ include "kv-tiered-inference.l2EvictionName" . }}"{{ include "kv-tiered-inference.alertExtraSelector" . }}
{{- end -}}

{{/* Series of one of the Curvine subchart's Services, named by the subchart's own helpers (templates are
global; its name overrides default to empty). Input: dict "root" $ "helper" "curvine.masterName", and
"suffix" for a Service named after a helper's name ("-node": the CSI node plugin's, curvine.csiName-node). */}}
{{- define "kv-tiered-inference.curvineSeries" -}}
{{- $curvine := dict "Values" (.root.Values.curvine | default dict) "Release" .root.Release "Chart" (dict "Name" "curvine") -}}
namespace="{{ .root.Release.Namespace }}",service="{{ include .helper $curvine }}{{ .suffix | default "" }}"{{ include "kv-tiered-inference.alertExtraSelector" .root }}
{{- end -}}

{{/*
Seconds of one eviction period: metrics.prometheusRule.evictionPeriod, else read from the CronJob
schedule for the shapes that have one fixed period; anything else asks for the value.
*/}}
{{- define "kv-tiered-inference.evictionPeriodSeconds" -}}
{{- $explicit := .Values.metrics.prometheusRule.evictionPeriod -}}
{{- $schedule := .Values.cache.l2.eviction.schedule | trim -}}
{{- $fields := splitList " " (regexReplaceAll "\\s+" $schedule " ") -}}
{{- if $explicit -}}
{{- if not (regexMatch "^[0-9]+[smhd]$" $explicit) -}}
{{- fail (printf "[prometheusrule-eviction-period] metrics.prometheusRule.evictionPeriod: %q: expected a duration such as 5m, 1h or 1d" $explicit) -}}
{{- end -}}
{{- $unit := get (dict "s" 1 "m" 60 "h" 3600 "d" 86400) (regexFind "[smhd]$" $explicit) -}}
{{- mul (int (trimSuffix (regexFind "[smhd]$" $explicit) $explicit)) $unit -}}
{{- else if has $schedule (list "@hourly") -}}3600
{{- else if has $schedule (list "@daily" "@midnight") -}}86400
{{- else if has $schedule (list "@weekly") -}}604800
{{- else if and (eq (len $fields) 5) (regexMatch "^\\*/[0-9]+$" (index $fields 0)) (eq (rest $fields | join " ") "* * * *") -}}
{{- mul (int (trimPrefix "*/" (index $fields 0))) 60 -}}
{{- else if and (eq (len $fields) 5) (regexMatch "^[0-9]+$" (index $fields 0)) (eq (rest $fields | join " ") "* * * *") -}}3600
{{- else if and (eq (len $fields) 5) (regexMatch "^[0-9]+$" (index $fields 0)) (regexMatch "^[0-9]+$" (index $fields 1)) (eq (slice $fields 2 | join " ") "* * *") -}}86400
{{- else -}}
{{- fail (printf "[prometheusrule-eviction-period] metrics.prometheusRule.evictionPeriod: the eviction schedule %q has no single period the alerts can read; set metrics.prometheusRule.evictionPeriod (e.g. 1h)" $schedule) -}}
{{- end -}}
{{- end -}}

{{/* Bytes of the L2 high watermark: a size, or a percentage of eviction.capacity (else claim.size). */}}
{{- define "kv-tiered-inference.l2HighWatermarkBytes" -}}
{{- $ev := .Values.cache.l2.eviction -}}
{{- $high := toString $ev.highWatermark -}}
{{- if hasSuffix "%" $high -}}
{{- $capacity := include "kv-tiered-inference.bytes" (list ($ev.capacity | default .Values.cache.l2.claim.size) (ternary "cache.l2.eviction.capacity" "cache.l2.claim.size" (not (empty $ev.capacity)))) -}}
{{- divf (mulf (float64 $capacity) (float64 (trimSuffix "%" $high))) 100 | int64 -}}
{{- else -}}
{{- include "kv-tiered-inference.bytes" (list $high "cache.l2.eviction.highWatermark") | float64 | int64 -}}
{{- end -}}
{{- end -}}

{{/* Whether the cluster serves an API (group/version/Kind), or the chart is told to assume it. Fails
with what to do otherwise, so an enabled feature never renders to nothing. Input: dict "root" $ "api"
"keda.sh/v1alpha1/ScaledObject" "key" "engine.autoscaling" "assume" <bool> "what" "KEDA". */}}
{{- define "kv-tiered-inference.requireApi" -}}
{{- if not (or .assume (.root.Capabilities.APIVersions.Has .api)) -}}
{{- fail (printf "[api-served] %s.enabled: the cluster does not serve %s (%s); install it first, or set %s.assumeApiServed=true when rendering without a cluster (helm template, GitOps)" .key .api .what .key) -}}
{{- end -}}
{{- end -}}
