{{/*
The vLLM engines: the model argument (a cross-pod invariant), the `vllm serve` arguments, and each
model's scheduling and resources.
*/}}

{{/* Where a pvc-sourced model is mounted; the same in every pod, so the model argument is too. */}}
{{- define "kv-tiered-inference.modelsMountPath" -}}/models{{- end -}}

{{/*
The model argument of `vllm serve`: identical on every replica (a cross-pod invariant: LMCache keys
include it). Input: the models[] entry.
*/}}
{{- define "kv-tiered-inference.modelArg" -}}
{{- if .source.pvc -}}
{{- printf "%s/%s" (include "kv-tiered-inference.modelsMountPath" .) (trimAll "/" .source.pvc.path) -}}
{{- else if .source.huggingface -}}
{{- .model -}}
{{- else -}}
{{- fail (printf "models[%s].source: target standalone needs source.huggingface or source.pvc (s3 and fsx are HyperPod sources)" .name) -}}
{{- end -}}
{{- end -}}

{{/* `--tensor-parallel-size` of one model: gpusPerReplica (default 1). Input: the models[] entry. */}}
{{- define "kv-tiered-inference.tensorParallelSize" -}}
{{- .gpusPerReplica | default 1 | int -}}
{{- end -}}

{{/*
Flags the chart sets on vllm serve itself: extraArgs may not repeat them (they carry invariants). With the native
backend the prefix hash is one too: it names the fs tier's files. Input: dict "root" $ "model" <models[] entry>.
*/}}
{{- define "kv-tiered-inference.reservedEngineFlags" -}}
--served-model-name --tensor-parallel-size -tp --dtype --max-model-len --gpu-memory-utilization --kv-transfer-config --enable-prefix-caching --no-enable-prefix-caching --kv-events-config --port --host --model --revision
{{- if include "kv-tiered-inference.nativeEnabled" .root }} --prefix-caching-hash-algo{{ end -}}
{{- end -}}

{{/*
The full `vllm serve` argument list of one model, as JSON. Input: dict "root" $ "model" <models[] entry>.
*/}}
{{- define "kv-tiered-inference.engineArgs" -}}
{{- $v := .root.Values -}}
{{- $m := .model -}}
{{- $reserved := include "kv-tiered-inference.reservedEngineFlags" . | splitList " " -}}
{{- range $arg := ($m.extraArgs | default list) -}}
{{- $flag := regexReplaceAll "=.*$" $arg "" -}}
{{- if has $flag $reserved -}}
{{- fail (printf "models[%s].extraArgs: %s is set by the chart from the model's own keys or cache (a cross-pod invariant); remove it from extraArgs" $m.name $flag) -}}
{{- end -}}
{{- end -}}
{{- $args := list "serve" (include "kv-tiered-inference.modelArg" $m) "--served-model-name" $m.model "--host" "0.0.0.0" "--port" (toString $v.engine.port) -}}
{{- $cpu := eq ($v.engine.accelerator | default "nvidia") "cpu" -}}
{{- if and $cpu (gt (int (include "kv-tiered-inference.tensorParallelSize" $m)) 1) -}}
{{- fail (printf "models[%s].gpusPerReplica is %v but engine.accelerator is cpu: the CPU engines run tensor parallel size 1; set gpusPerReplica to 1" $m.name $m.gpusPerReplica) -}}
{{- end -}}
{{- $args = concat $args (list "--tensor-parallel-size" (include "kv-tiered-inference.tensorParallelSize" $m)) -}}
{{- with $m.dtype }}{{ $args = concat $args (list "--dtype" .) }}{{ end -}}
{{- with $m.maxModelLen }}{{ $args = concat $args (list "--max-model-len" (toString .)) }}{{ end -}}
{{- /* On CPU, L0's size is VLLM_CPU_KVCACHE_SPACE (engine.cpuKVCacheSpace), not a share of GPU memory. */ -}}
{{- if not $cpu -}}
{{- with $m.gpuMemoryUtilization }}{{ $args = concat $args (list "--gpu-memory-utilization" (toString .)) }}{{ end -}}
{{- end -}}
{{- with (dig "huggingface" "revision" "" ($m.source | default dict)) }}{{ $args = concat $args (list "--revision" .) }}{{ end -}}
{{- if $v.cache.l0.enabled -}}
{{- $args = append $args "--enable-prefix-caching" -}}
{{- else -}}
{{- $args = append $args "--no-enable-prefix-caching" -}}
{{- end -}}
{{- if include "kv-tiered-inference.lmcacheEnabled" .root -}}
{{- $transfer := dict "kv_connector" "LMCacheConnectorV1" "kv_role" "kv_both" "kv_load_failure_policy" ($v.cache.kvLoadFailurePolicy | default "recompute") -}}
{{- $args = concat $args (list "--kv-transfer-config" (toJson $transfer)) -}}
{{- else if include "kv-tiered-inference.nativeEnabled" .root -}}
{{- $args = concat $args (list "--kv-transfer-config" (include "kv-tiered-inference.nativeTransferConfig" .) "--prefix-caching-hash-algo" $v.cache.hashAlgorithm) -}}
{{- end -}}
{{- if eq $v.routing.strategy "kvaware" -}}
{{- $events := dict "enable_kv_cache_events" true "publisher" "zmq" "endpoint" (printf "tcp://*:%d" (int $v.engine.kvEventsPort)) -}}
{{- $args = concat $args (list "--kv-events-config" (toJson $events)) -}}
{{- end -}}
{{- toJson (concat $args ($m.extraArgs | default list)) -}}
{{- end -}}

{{/* Tolerations of one model's pods: engine.tolerations, then the model's. Input: the model; root via dict. */}}
{{- define "kv-tiered-inference.engineTolerations" -}}
{{- toJson (concat (.root.Values.engine.tolerations | default list) (.model.tolerations | default list)) -}}
{{- end -}}

{{/* Node selector of one model's pods: the instance type label plus the model's own. */}}
{{- define "kv-tiered-inference.engineNodeSelector" -}}
{{- $selector := deepCopy (.model.nodeSelector | default dict) -}}
{{- with .model.instanceType }}{{ $_ := set $selector "node.kubernetes.io/instance-type" . }}{{ end -}}
{{- toJson $selector -}}
{{- end -}}

{{/* Resources of one model's vLLM container: its resources with nvidia.com/gpu = gpusPerReplica (none on CPU). */}}
{{- define "kv-tiered-inference.engineResources" -}}
{{- $m := .model -}}
{{- $res := deepCopy ($m.resources | default dict) -}}
{{- $gpus := int ($m.gpusPerReplica | default 1) -}}
{{- if eq (.root.Values.engine.accelerator | default "nvidia") "cpu" -}}
{{- range $kind := list "requests" "limits" -}}
{{- if hasKey (get $res $kind | default dict) "nvidia.com/gpu" -}}
{{- fail (printf "models[%s].resources.%s sets nvidia.com/gpu but engine.accelerator is cpu; drop the GPU resource or set engine.accelerator to nvidia" $m.name $kind) -}}
{{- end -}}
{{- end -}}
{{- toJson $res -}}
{{- else -}}
{{- range $kind := list "requests" "limits" -}}
{{- $list := get $res $kind | default dict -}}
{{- if and (hasKey $list "nvidia.com/gpu") (ne (toString (get $list "nvidia.com/gpu")) (toString $gpus)) -}}
{{- fail (printf "models[%s].resources.%s nvidia.com/gpu is %v but gpusPerReplica (= tensor parallel size) is %d; drop the GPU resource, the chart sets it" $m.name $kind (get $list "nvidia.com/gpu") $gpus) -}}
{{- end -}}
{{- $_ := set $list "nvidia.com/gpu" (toString $gpus) -}}
{{- $_ := set $res $kind $list -}}
{{- end -}}
{{- toJson $res -}}
{{- end -}}
{{- end -}}
