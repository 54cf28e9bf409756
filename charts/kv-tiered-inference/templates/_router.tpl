{{/*
The router: its policy, its arguments, and how it finds the engines (Kubernetes discovery, static
workers, or the StatefulSet addresses `kvaware` needs).
*/}}

{{/*
Whether the engines of this release are a StatefulSet addressed by ordinal: routing.strategy kvaware with
router.discovery.mode kubernetes. vllm-router 0.1.17 builds a discovered worker's KV-event identity from
GET /get_server_info, which vLLM does not serve (it is SGLang's endpoint), and then falls back to
load-only scoring; static --kv-event-source entries need stable per-replica addresses.
*/}}
{{- define "kv-tiered-inference.kvStatic" -}}
{{- if and (eq .Values.routing.strategy "kvaware") (eq .Values.router.discovery.mode "kubernetes") -}}true{{- end -}}
{{- end -}}

{{/* Stable DNS name of replica i of one model's StatefulSet. Input: dict "root" $ "model" m "index" i. */}}
{{- define "kv-tiered-inference.engineReplicaHost" -}}
{{- $name := include "kv-tiered-inference.engineName" . -}}
{{- printf "%s-%d.%s.%s.svc" $name (int .index) $name .root.Release.Namespace -}}
{{- end -}}

{{/* The router --policy of a routing strategy (HyperPod's names mapped onto vllm-router's). */}}
{{- define "kv-tiered-inference.routerPolicy" -}}
{{- $map := dict "prefixaware" "cache_aware" "kvaware" "kv_aware" "session" "consistent_hash" "roundrobin" "round_robin" -}}
{{- get $map .Values.routing.strategy | required (printf "[routing-strategy] routing.strategy: %q: expected prefixaware, kvaware, session or roundrobin" .Values.routing.strategy) -}}
{{- end -}}

{{/*
The vllm-router argument list of one model, as JSON (flag names from PyPI vllm-router 0.1.17; the
chart tests parse them with its own argument parser). Input: dict "root" $ "model" <models[] entry>.
*/}}
{{- define "kv-tiered-inference.routerArgs" -}}
{{- $v := .root.Values -}}
{{- $r := $v.router -}}
{{- $args := list "--host" "0.0.0.0" "--port" (toString $r.port) "--policy" (include "kv-tiered-inference.routerPolicy" .root) -}}
{{- $args = concat $args (list "--prometheus-host" "0.0.0.0" "--prometheus-port" (toString $r.metricsPort)) -}}
{{- if include "kv-tiered-inference.kvStatic" .root -}}
{{- $urls := list -}}
{{- $sources := list -}}
{{- range $i := until (int .model.replicas) -}}
{{- $host := include "kv-tiered-inference.engineReplicaHost" (dict "root" $.root "model" $.model "index" $i) -}}
{{- $url := printf "http://%s:%d" $host (int $v.engine.port) -}}
{{- $urls = append $urls $url -}}
{{- $sources = concat $sources (list "--kv-event-source" (printf "%s=tcp://%s:%d" $url $host (int $v.engine.kvEventsPort))) -}}
{{- end -}}
{{- $args = concat $args (prepend $urls "--worker-urls") $sources (list "--kv-event-model" .model.model) -}}
{{- /* The router hashes blocks like the engine: pass the --block-size vLLM reads from extraArgs on, in any
spelling (vLLM's default is 16). */ -}}
{{- $blockSize := "" -}}
{{- range (include "kv-tiered-inference.vllmOptions" (dict "args" (.model.extraArgs | default list)) | fromJsonArray) -}}
{{- if and (gt (len .name) 2) (hasPrefix .name "--block-size") }}{{ $blockSize = .value }}{{ end -}}
{{- end -}}
{{- with $blockSize }}{{ $args = concat $args (list "--kv-event-block-size" .) }}{{ end -}}
{{- else if eq $r.discovery.mode "kubernetes" -}}
{{- $selector := list -}}
{{- range $line := include "kv-tiered-inference.engineSelectorLabels" . | splitList "\n" -}}
{{- $pair := regexSplit ":\\s*" $line 2 -}}
{{- $selector = append $selector (printf "%s=%s" (index $pair 0) (index $pair 1 | trimAll "\"")) -}}
{{- end -}}
{{- $args = append $args "--service-discovery" -}}
{{- $args = concat $args (prepend $selector "--selector") -}}
{{- $args = concat $args (list "--service-discovery-namespace" .root.Release.Namespace "--service-discovery-port" (toString $v.engine.port)) -}}
{{- else -}}
{{- $workers := get ($r.discovery.staticWorkers | default dict) .model.name | default list -}}
{{- if not $workers -}}
{{- fail (printf "[router-static-workers] router.discovery.staticWorkers: no entry for model %q while router.discovery.mode is static; add [{url: http://host:%d}] under its name" .model.name (int $v.engine.port)) -}}
{{- end -}}
{{- $urls := list -}}
{{- range $workers }}{{ $urls = append $urls .url }}{{ end -}}
{{- $args = concat $args (prepend $urls "--worker-urls") -}}
{{- if eq $v.routing.strategy "kvaware" -}}
{{- range $workers -}}
{{- if not .kvEvents -}}
{{- fail (printf "[router-static-kv-events] router.discovery.staticWorkers: routing.strategy kvaware with static workers needs kvEvents (tcp://host:%d) on every worker of model %q (missing for %s)" (int $v.engine.kvEventsPort) $.model.name .url) -}}
{{- end -}}
{{- $args = concat $args (list "--kv-event-source" (printf "%s=%s" .url .kvEvents)) -}}
{{- end -}}
{{- $args = concat $args (list "--kv-event-model" .model.model) -}}
{{- end -}}
{{- end -}}
{{- /* The key engines require, from the pod's VLLM_API_KEY (a Secret): Kubernetes expands $(VAR) in args. */ -}}
{{- if $v.auth.apiKeySecret.name }}{{ $args = concat $args (list "--api-key" "$(VLLM_API_KEY)") }}{{ end -}}
{{- toJson (concat $args ($r.extraArgs | default list)) -}}
{{- end -}}
