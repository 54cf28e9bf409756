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
{{- fail (printf "[model-source-target] models[%s].source: target standalone needs source.huggingface or source.pvc (s3 and fsx are HyperPod sources)" .name) -}}
{{- end -}}
{{- end -}}

{{/* `--tensor-parallel-size` of one model: gpusPerReplica (default 1). Input: the models[] entry. */}}
{{- define "kv-tiered-inference.tensorParallelSize" -}}
{{- .gpusPerReplica | default 1 | int -}}
{{- end -}}

{{/*
Flags the chart (or, on target hyperpod, the operator) sets on vllm serve itself, every option string of each:
extraArgs may not set them in any spelling (they carry invariants and sized values). With the native backend the
prefix hash is one too: it names the fs tier's files. kvtier validate's engine-args-reserved rule holds the same
list. Input: dict "root" $ "model" <models[] entry>.
*/}}
{{- define "kv-tiered-inference.reservedEngineFlags" -}}
--served-model-name --tensor-parallel-size -tp --dtype --max-model-len --gpu-memory-utilization --kv-transfer-config --enable-prefix-caching --no-enable-prefix-caching --kv-events-config --port --host --model --revision
{{- if include "kv-tiered-inference.nativeEnabled" .root }} --prefix-caching-hash-algo{{ end -}}
{{- end -}}

{{/*
The options in a list of `vllm serve` arguments as vLLM's parser reads them, as a JSON list of {"name",
"index", "item", "value"} in written order (of a repeated flag the last wins). Mirrors
kvtier.upstream.vllm_args: underscores are dashes in a long name (up to its first "." and before "="), an
item is an option when it starts with "-" unless it is "-", a negative number, or holds a space in its name;
"--flag=value" or the next item that is no option is the value; the item after a dotted name without "=" is
always its value; nothing after "--" is an option. Input: dict "args" <list>.
*/}}
{{- define "kv-tiered-inference.vllmOptions" -}}
{{- $args := list -}}
{{- range .args }}{{ $args = append $args (toString .) }}{{ end -}}
{{- $isOption := list -}}
{{- range $args -}}
{{- $name := splitList "=" . | first -}}
{{- $isOption = append $isOption (and (hasPrefix "-" .) (gt (len .) 1) (not (regexMatch "^-[0-9]+$|^-[0-9]*[.][0-9]+$" .)) (not (contains " " $name))) -}}
{{- end -}}
{{- $out := list -}}
{{- $skip := false -}}
{{- $rest := false -}}
{{- range $i, $arg := $args -}}
{{- if or $skip $rest -}}
{{- $skip = false -}}
{{- else if eq $arg "--" -}}
{{- $rest = true -}}
{{- else if index $isOption $i -}}
{{- $key := splitList "=" $arg | first -}}
{{- $name := splitList "." $key | first -}}
{{- if hasPrefix "--" $name }}{{ $name = printf "--%s" (trimPrefix "--" $name | replace "_" "-") }}{{ end -}}
{{- $value := "" -}}
{{- $next := add1 $i | int -}}
{{- if contains "=" $arg -}}
{{- $value = trimPrefix (printf "%s=" $key) $arg -}}
{{- else if and (lt $next (len $args)) (or (contains "." $key) (not (index $isOption $next))) -}}
{{- $value = index $args $next -}}
{{- $skip = true -}}
{{- end -}}
{{- $out = append $out (dict "name" $name "index" $i "item" $arg "value" $value) -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/*
The reserved flag (reservedEngineFlags) an option stands for to vLLM, or "": the flag itself, or one its name
is a prefix of (argparse expands a unique prefix, and refuses one of several: either way not the user's to
set; a single-dash prefix written with "=" it does not expand). Input: dict "name" <canonical option name>
"item" <the item as written> "reserved" <list>.
*/}}
{{- define "kv-tiered-inference.reservedFlagOf" -}}
{{- $name := .name -}}
{{- $found := "" -}}
{{- if has $name .reserved -}}
{{- $found = $name -}}
{{- else if and (gt (len $name) 1) (ne $name "--") (or (hasPrefix "--" $name) (not (contains "=" .item))) -}}
{{- range .reserved -}}
{{- if and (not $found) (hasPrefix $name .) }}{{ $found = . }}{{ end -}}
{{- end -}}
{{- end -}}
{{- $found -}}
{{- end -}}

{{/*
Refuses a models[] entry's extraArgs item that sets a reserved flag, in any spelling vLLM accepts
(`--max_model_len`, `--max-model-len=1`, `--max-model`, `-t`, `--kv-transfer-config.kv_role`): vLLM keeps the
last of a repeated flag, so it would override the chart's value. Both targets. Input: dict "root" $ "model"
<models[] entry>.
*/}}
{{- define "kv-tiered-inference.checkExtraArgs" -}}
{{- $m := .model -}}
{{- $reserved := include "kv-tiered-inference.reservedEngineFlags" . | splitList " " -}}
{{- $by := ternary "the chart or the HyperPod operator" "the chart" (eq .root.Values.target "hyperpod") -}}
{{- range (include "kv-tiered-inference.vllmOptions" (dict "args" ($m.extraArgs | default list)) | fromJsonArray) -}}
{{- $flag := include "kv-tiered-inference.reservedFlagOf" (dict "name" .name "item" .item "reserved" $reserved) -}}
{{- if $flag -}}
{{- $key := splitList "=" .item | first -}}
{{- $why := list -}}
{{- if contains "_" (splitList "." $key | first) }}{{ $why = append $why "vLLM reads underscores in a flag's name as dashes" }}{{ end -}}
{{- if ne .name $flag }}{{ $why = append $why (printf "vLLM expands %s to %s (a prefix no other of its flags starts with), or refuses it as ambiguous" .name $flag) }}{{ end -}}
{{- if contains "." $key }}{{ $why = append $why "a dotted name sets keys of the flag's JSON, replacing the chart's whole value" }}{{ end -}}
{{- $how := ternary "" (printf " (extraArgs[%d] %q: %s)" (int .index) .item (join "; " $why)) (empty $why) -}}
{{- fail (printf "[engine-args-reserved] models[%s].extraArgs: %s is set by %s from the model's own keys or cache (a cross-pod invariant or a sized value)%s; remove it from extraArgs and set the values key the chart renders it from" $m.name $flag $by $how) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The full `vllm serve` argument list of one model, as JSON. Input: dict "root" $ "model" <models[] entry>.
*/}}
{{- define "kv-tiered-inference.engineArgs" -}}
{{- $v := .root.Values -}}
{{- $m := .model -}}
{{- include "kv-tiered-inference.checkExtraArgs" . -}}
{{- $args := list "serve" (include "kv-tiered-inference.modelArg" $m) "--served-model-name" $m.model "--host" "0.0.0.0" "--port" (toString $v.engine.port) -}}
{{- $cpu := eq ($v.engine.accelerator | default "nvidia") "cpu" -}}
{{- if and $cpu (gt (int (include "kv-tiered-inference.tensorParallelSize" $m)) 1) -}}
{{- fail (printf "[cpu-engine-one-rank] models[%s].gpusPerReplica: %v but engine.accelerator is cpu: the CPU engines run tensor parallel size 1; set gpusPerReplica to 1" $m.name $m.gpusPerReplica) -}}
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
{{- if include "kv-tiered-inference.saltConnector" .root -}}
{{- /* LMCache's connector plus the request's cache_salt as a chunk-key tag (tenant_salt.py). */ -}}
{{- $_ := set $transfer "kv_connector" "SaltTaggedLMCacheConnectorV1" -}}
{{- $_ := set $transfer "kv_connector_module_path" "tenant_salt" -}}
{{- end -}}
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
{{- fail (printf "[cpu-engine-one-rank] models[%s].resources.%s: sets nvidia.com/gpu but engine.accelerator is cpu; drop the GPU resource or set engine.accelerator to nvidia" $m.name $kind) -}}
{{- end -}}
{{- end -}}
{{- toJson $res -}}
{{- else -}}
{{- range $kind := list "requests" "limits" -}}
{{- $list := get $res $kind | default dict -}}
{{- if and (hasKey $list "nvidia.com/gpu") (ne (toString (get $list "nvidia.com/gpu")) (toString $gpus)) -}}
{{- fail (printf "[gpu-resource-from-tp] models[%s].resources.%s: nvidia.com/gpu is %v but gpusPerReplica (= tensor parallel size) is %d; drop the GPU resource, the chart sets it" $m.name $kind (get $list "nvidia.com/gpu") $gpus) -}}
{{- end -}}
{{- $_ := set $list "nvidia.com/gpu" (toString $gpus) -}}
{{- $_ := set $res $kind $list -}}
{{- end -}}
{{- toJson $res -}}
{{- end -}}
{{- end -}}

{{/*
engine.extraEnv as a YAML list, in its order. When the engines import the chart's modules from the podscripts
ConfigMap (.podscripts), a PYTHONPATH item keeps the mount first, where it stands: the chart's own PYTHONPATH
is then left out (a second one would hide it, and vLLM would not find its connector or tier). A literal value
is joined after the mount; a valueFrom is read into KVTIER_USER_PYTHONPATH and referenced as $(...), which
the kubelet expands from the variables before it.
*/}}
{{- define "kv-tiered-inference.engineExtraEnv" -}}
{{- $mount := include "kv-tiered-inference.podscriptsMountPath" .root -}}
{{- $items := list -}}
{{- range (.root.Values.engine.extraEnv | default list) -}}
{{- if and $.podscripts (eq .name "PYTHONPATH") -}}
{{- if .valueFrom -}}
{{- $items = append $items (dict "name" "KVTIER_USER_PYTHONPATH" "valueFrom" .valueFrom) -}}
{{- $items = append $items (dict "name" "PYTHONPATH" "value" (printf "%s:$(KVTIER_USER_PYTHONPATH)" $mount)) -}}
{{- else -}}
{{- $items = append $items (dict "name" "PYTHONPATH" "value" (join ":" (compact (list $mount (toString (.value | default "")))))) -}}
{{- end -}}
{{- else -}}
{{- $items = append $items . -}}
{{- end -}}
{{- end -}}
{{- with $items }}{{ toYaml . }}{{ end -}}
{{- end -}}

{{/* Whether engine.extraEnv sets PYTHONPATH (kv-tiered-inference.engineExtraEnv then renders the chart's). */}}
{{- define "kv-tiered-inference.extraEnvSetsPythonPath" -}}
{{- range (.Values.engine.extraEnv | default list) }}{{ if eq .name "PYTHONPATH" }}true{{ end }}{{ end -}}
{{- end -}}
