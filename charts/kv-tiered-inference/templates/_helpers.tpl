{{/*
Names, labels, images and the cache invariants of the umbrella. The invariants (seed, chunk size, serde,
model argument, mount path) are computed here once and read by every template that needs them.
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
One image reference: global.imageRegistry > image.registry; digest beats tag.
Input: dict "image" <image values> "root" $.
*/}}
{{- define "kv-tiered-inference.image" -}}
{{- $registry := .image.registry -}}
{{- with .root.Values.global }}{{ if .imageRegistry }}{{ $registry = .imageRegistry }}{{ end }}{{ end -}}
{{- $repo := .image.repository -}}
{{- if $registry }}{{ $repo = printf "%s/%s" $registry .image.repository }}{{ end -}}
{{- if .image.digest -}}
{{- printf "%s@%s" $repo .image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (required (printf "image %s needs a tag or a digest" .image.repository) .image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The test pods' image values: tests.image, or the engine image when its repository is empty. */}}
{{- define "kv-tiered-inference.testImage" -}}
{{- if .Values.tests.image.repository -}}
{{- include "kv-tiered-inference.image" (dict "image" .Values.tests.image "root" .) -}}
{{- else -}}
{{- include "kv-tiered-inference.image" (dict "image" .Values.engine.image "root" .) -}}
{{- end -}}
{{- end -}}

{{/* Pull secrets of every pod: global first, then engine.imagePullSecrets. */}}
{{- define "kv-tiered-inference.imagePullSecrets" -}}
{{- $secrets := list -}}
{{- with .Values.global }}{{ with .imagePullSecrets }}{{ $secrets = concat $secrets . }}{{ end }}{{ end -}}
{{- $secrets = concat $secrets .Values.engine.imagePullSecrets | uniq -}}
{{- with $secrets }}
imagePullSecrets:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
Bytes of a Kubernetes quantity (1Gi, 500G, 1.5Ti, 2048Mi, 123), as a float64. Fails on anything else.
*/}}
{{- define "kv-tiered-inference.bytes" -}}
{{- $q := toString . -}}
{{- if not (regexMatch "^[0-9]+(\\.[0-9]+)?([kMGTP]|[KMGTP]i)?$" $q) -}}
{{- fail (printf "quantity %q: expected a size such as 110Gi, 96G or 1024Mi" $q) -}}
{{- end -}}
{{- $number := regexFind "^[0-9]+(\\.[0-9]+)?" $q -}}
{{- $unit := trimPrefix $number $q -}}
{{- $factors := dict "" 1.0 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "P" 1e15 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 -}}
{{- mulf (float64 $number) (get $factors $unit) -}}
{{- end -}}

{{/* Name of the L2 PVC (the contract shared with the HyperPod templates). */}}
{{- define "kv-tiered-inference.l2ClaimName" -}}
{{- .Values.cache.l2.claim.existingClaim | default (printf "%s-l2cache" .Release.Name) -}}
{{- end -}}

{{/* StorageClass of the created L2 PVC: the given one, else this release's Curvine StorageClass. */}}
{{- define "kv-tiered-inference.l2StorageClass" -}}
{{- $claim := .Values.cache.l2.claim -}}
{{- if $claim.storageClassName -}}
{{- $claim.storageClassName -}}
{{- else if .Values.curvine.enabled -}}
{{- $sc := dig "storageClass" "name" "" .Values.curvine -}}
{{- $sc | default (printf "%s-curvine" .Release.Name) -}}
{{- else -}}
{{- fail "cache.l2: curvine.enabled is false, so the L2 PVC needs an existing Curvine: set cache.l2.claim.existingClaim (an RWX PVC) or cache.l2.claim.storageClassName (the external Curvine StorageClass)" -}}
{{- end -}}
{{- end -}}

{{/* LMCache remote_url of the shared L2: host and port are placeholders its URL parser requires. */}}
{{- define "kv-tiered-inference.remoteUrl" -}}
{{- printf "fs://localhost:0%s/" .Values.cache.l2.mountPath -}}
{{- end -}}

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

{{/*
max_local_cpu_size in GiB of one model: cache.l1.size, or with `auto` the memory limit minus /dev/shm
(memory-backed, so it counts against the limit) minus cache.l1.headroom. Refused when under 1 GiB.
Input: dict "root" $ "model" <models[] entry>.
*/}}
{{- define "kv-tiered-inference.l1SizeGiB" -}}
{{- $l1 := .root.Values.cache.l1 -}}
{{- if ne (toString $l1.size) "auto" -}}
{{- $l1.size -}}
{{- else -}}
{{- $limit := dig "resources" "limits" "memory" "" .model -}}
{{- if not $limit -}}
{{- fail (printf "models[%s]: cache.l1.size is auto, which needs resources.limits.memory on the model (L1 = limit - engine.shmSize - cache.l1.headroom); set the limit or a number of GB in cache.l1.size" .model.name) -}}
{{- end -}}
{{- $gib := 1073741824.0 -}}
{{- $free := subf (subf (include "kv-tiered-inference.bytes" $limit | float64) (include "kv-tiered-inference.bytes" .root.Values.engine.shmSize | float64)) (include "kv-tiered-inference.bytes" $l1.headroom | float64) -}}
{{- $size := floor (divf $free $gib) -}}
{{- if lt $size 1.0 -}}
{{- fail (printf "models[%s]: cache.l1.size auto leaves %.1f GiB for L1 (memory limit %s - /dev/shm %s - headroom %s); raise resources.limits.memory, lower engine.shmSize or cache.l1.headroom, or set cache.l1.size" .model.name (divf $free $gib) (toString $limit) (toString .root.Values.engine.shmSize) (toString $l1.headroom)) -}}
{{- end -}}
{{- $size | int -}}
{{- end -}}
{{- end -}}

{{/* Whether LMCache is used at all (L1 or L2 on). */}}
{{- define "kv-tiered-inference.lmcacheEnabled" -}}
{{- if or .Values.cache.l1.enabled .Values.cache.l2.enabled -}}true{{- end -}}
{{- end -}}

{{/*
The LMCache config file of one model (YAML). Every key is LMCache's (lmcache/v1/config.py); the test
suite loads it with LMCacheEngineConfig.from_file. Input: dict "root" $ "model" <models[] entry>.
*/}}
{{- define "kv-tiered-inference.lmcacheConfig" -}}
{{- $cache := .root.Values.cache -}}
chunk_size: {{ $cache.chunkSize }}
pre_caching_hash_algorithm: {{ $cache.hashAlgorithm }}
local_cpu: {{ $cache.l1.enabled }}
{{- /* LMCache allocates its CPU buffer from max_local_cpu_size even with local_cpu off (L2 transfers stage there). */}}
max_local_cpu_size: {{ include "kv-tiered-inference.l1SizeGiB" . }}
{{- if $cache.l2.enabled }}
remote_url: {{ include "kv-tiered-inference.remoteUrl" .root | quote }}
remote_serde: naive
{{- end }}
{{- end -}}

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
{{- get $map .Values.routing.strategy | required (printf "routing.strategy %q: expected prefixaware, kvaware, session or roundrobin" .Values.routing.strategy) -}}
{{- end -}}

{{/* Flags the chart sets on vllm serve itself: extraArgs may not repeat them (they carry invariants). */}}
{{- define "kv-tiered-inference.reservedEngineFlags" -}}
--served-model-name --tensor-parallel-size -tp --dtype --max-model-len --gpu-memory-utilization --kv-transfer-config --enable-prefix-caching --no-enable-prefix-caching --kv-events-config --port --host --model --revision
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
{{- $args = concat $args (list "--tensor-parallel-size" (toString ($m.gpusPerReplica | default 1))) -}}
{{- with $m.dtype }}{{ $args = concat $args (list "--dtype" .) }}{{ end -}}
{{- with $m.maxModelLen }}{{ $args = concat $args (list "--max-model-len" (toString .)) }}{{ end -}}
{{- with $m.gpuMemoryUtilization }}{{ $args = concat $args (list "--gpu-memory-utilization" (toString .)) }}{{ end -}}
{{- with (dig "huggingface" "revision" "" ($m.source | default dict)) }}{{ $args = concat $args (list "--revision" .) }}{{ end -}}
{{- if $v.cache.l0.enabled -}}
{{- $args = append $args "--enable-prefix-caching" -}}
{{- else -}}
{{- $args = append $args "--no-enable-prefix-caching" -}}
{{- end -}}
{{- if include "kv-tiered-inference.lmcacheEnabled" .root -}}
{{- $args = concat $args (list "--kv-transfer-config" (dict "kv_connector" "LMCacheConnectorV1" "kv_role" "kv_both" | toJson)) -}}
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

{{/* Resources of one model's vLLM container: its resources with nvidia.com/gpu = gpusPerReplica. */}}
{{- define "kv-tiered-inference.engineResources" -}}
{{- $m := .model -}}
{{- $res := deepCopy ($m.resources | default dict) -}}
{{- $gpus := int ($m.gpusPerReplica | default 1) -}}
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
{{- /* The router hashes blocks like the engine: pass a --block-size from extraArgs on (vLLM's default is 16). */ -}}
{{- $blockSize := "" -}}
{{- $previous := "" -}}
{{- range (.model.extraArgs | default list) -}}
{{- if eq $previous "--block-size" }}{{ $blockSize = . }}{{ end -}}
{{- if hasPrefix "--block-size=" . }}{{ $blockSize = trimPrefix "--block-size=" . }}{{ end -}}
{{- $previous = . -}}
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
{{- fail (printf "router.discovery.mode is static but router.discovery.staticWorkers has no entry for model %q; add [{url: http://host:%d}] under its name" .model.name (int $v.engine.port)) -}}
{{- end -}}
{{- $urls := list -}}
{{- range $workers }}{{ $urls = append $urls .url }}{{ end -}}
{{- $args = concat $args (prepend $urls "--worker-urls") -}}
{{- if eq $v.routing.strategy "kvaware" -}}
{{- range $workers -}}
{{- if not .kvEvents -}}
{{- fail (printf "routing.strategy kvaware with static workers needs kvEvents (tcp://host:%d) on every worker of model %q (missing for %s)" (int $v.engine.kvEventsPort) $.model.name .url) -}}
{{- end -}}
{{- $args = concat $args (list "--kv-event-source" (printf "%s=%s" .url .kvEvents)) -}}
{{- end -}}
{{- $args = concat $args (list "--kv-event-model" .model.model) -}}
{{- end -}}
{{- end -}}
{{- toJson (concat $args ($r.extraArgs | default list)) -}}
{{- end -}}

{{/*
Common spec of a helm test pod: test hook, kvcheck.py from the podscripts ConfigMap, and the node
selection of the model's engines so the engine image (the default test image) is already pulled.
Input: dict "root" $ "model" <models[] entry or nil> "name" <pod name> "weight" <hook weight>.
*/}}
{{- define "kv-tiered-inference.testPodMeta" -}}
apiVersion: v1
kind: Pod
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "kv-tiered-inference.labels" .root | nindent 4 }}
    app.kubernetes.io/component: test
  annotations:
    helm.sh/hook: test
    helm.sh/hook-weight: {{ .weight | quote }}
    helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
{{- end -}}

{{- define "kv-tiered-inference.testPodSpec" -}}
restartPolicy: Never
automountServiceAccountToken: false
enableServiceLinks: false
{{- include "kv-tiered-inference.imagePullSecrets" .root }}
securityContext:
  {{- toYaml .root.Values.engine.podSecurityContext | nindent 2 }}
{{- with .model }}
{{- with (include "kv-tiered-inference.engineNodeSelector" $ | fromJson) }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (include "kv-tiered-inference.engineTolerations" $ | fromJsonArray) }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The test container's fixed parts (image, resources, security, podscripts mount). Input: root. */}}
{{- define "kv-tiered-inference.testContainerCommon" -}}
image: {{ include "kv-tiered-inference.testImage" . }}
imagePullPolicy: {{ .Values.tests.image.pullPolicy | default .Values.engine.image.pullPolicy }}
resources:
  {{- toYaml .Values.tests.resources | nindent 2 }}
securityContext:
  {{- toYaml .Values.engine.securityContext | nindent 2 }}
{{- end -}}
