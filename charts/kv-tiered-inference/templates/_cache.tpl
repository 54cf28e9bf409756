{{/*
The KV cache tiers: L1 sizing, the L2 claim and its StorageClass, and the LMCache config. The cross-pod
invariants (chunk size, hash algorithm, serde, L2 URL) are written here once and read by every template
that needs them.
*/}}

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

{{/*
Refuse an L2 the engines could not write. The Curvine CSI controller creates each volume directory
as curvine.csi.volumeAccess.uid:gid with mode 0755 (owner), 0775 (group) or 0777 (world), and
curvine-fuse lets the kernel enforce it (default_permissions). Helm hands a subchart only its own
values, so the engines' identity (engine.podSecurityContext, also used by the eviction CronJob and the
test pods) cannot flow into the subchart: this check keeps the two equal instead.
*/}}
{{- define "kv-tiered-inference.l2AccessCheck" -}}
{{- $claim := .Values.cache.l2.claim -}}
{{- $curvine := .Values.curvine | default dict -}}
{{- if and .Values.cache.l2.enabled $curvine.enabled (not $claim.existingClaim) (not $claim.storageClassName) (dig "csi" "enabled" true $curvine) -}}
{{- $access := dig "csi" "volumeAccess" dict $curvine -}}
{{- $mode := $access.mode | default "group" -}}
{{- $pod := .Values.engine.podSecurityContext | default dict -}}
{{- if and (ne $mode "world") (not (hasKey $pod "runAsUser")) -}}
{{- fail "engine.podSecurityContext.runAsUser is unset, so the engines' UID is the image's and the chart cannot give them the L2: set it (and curvine.csi.volumeAccess.uid to the same value), or curvine.csi.volumeAccess.mode=world to let any UID write" -}}
{{- end -}}
{{- if ne $mode "world" -}}
{{- $groups := $pod.supplementalGroups | default list -}}
{{- if hasKey $pod "runAsGroup" }}{{ $groups = append $groups $pod.runAsGroup }}{{ end -}}
{{- if hasKey $pod "fsGroup" }}{{ $groups = append $groups $pod.fsGroup }}{{ end -}}
{{- $ownerOk := eq (int $pod.runAsUser) (int $access.uid) -}}
{{- $groupOk := false -}}
{{- range $groups }}{{ if and (eq $mode "group") (eq (int .) (int $access.gid)) }}{{ $groupOk = true }}{{ end }}{{ end -}}
{{- if not (or $ownerOk $groupOk) -}}
{{- fail (printf "engine.podSecurityContext (runAsUser %v, runAsGroup %v, fsGroup %v) cannot write the L2: curvine.csi.volumeAccess creates each volume directory as %v:%v with mode %s. Set curvine.csi.volumeAccess.uid to engine.podSecurityContext.runAsUser and gid to its fsGroup, or mode=world to let any UID write" $pod.runAsUser (dig "runAsGroup" "unset" $pod) (dig "fsGroup" "unset" $pod) $access.uid $access.gid (get (dict "owner" "0755 (owner)" "group" "0775 (group)") $mode)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The L2 namespace of one model: the directory under cache.l2.mountPath that holds its chunks. LMCache's
chunk key names only the model argument, world size, worker, prefix hash and dtype, and its files carry
no checksum, so two models behind one model argument (HyperPod mounts each at the same path) or a new
revision would read each other's KV. The directory is derived from everything that makes a chunk valid;
anything that changes it starts an empty namespace instead of serving wrong KV.
Input: dict "root" $ "model" <models[] entry>. Output: `<model name>.<12 hex>`.
*/}}
{{- define "kv-tiered-inference.l2Namespace" -}}
{{- $v := .root.Values -}}
{{- $m := .model -}}
{{- $source := deepCopy ($m.source | default dict) -}}
{{- with $source.huggingface }}{{ $_ := unset . "tokenSecret" }}{{ end -}}
{{- $identity := dict
  "model" $m.model
  "source" $source
  "dtype" ($m.dtype | default "auto")
  "tensorParallel" (toString (include "kv-tiered-inference.tensorParallelSize" $m))
  "chunkSize" (toString $v.cache.chunkSize)
  "hashAlgorithm" $v.cache.hashAlgorithm
  "lmcache" (toString $v.cache.lmcacheVersion)
  "accelerator" ($v.engine.accelerator | default "nvidia")
  "salt" (toString ($v.cache.l2.namespaceSalt | default "")) -}}
{{- if eq $v.target "standalone" -}}
{{- $_ := set $identity "modelArg" (include "kv-tiered-inference.modelArg" $m) -}}
{{- end -}}
{{- printf "%s.%s" $m.name (toJson $identity | sha256sum | trunc 12) -}}
{{- end -}}

{{/*
LMCache remote_url of one model's L2 namespace: host and port are placeholders its URL parser requires;
LMCache's fs connector creates the directory at start. Input: dict "root" $ "model" <models[] entry>.
*/}}
{{- define "kv-tiered-inference.remoteUrl" -}}
{{- printf "fs://localhost:0%s/" (include "kv-tiered-inference.l2Dir" .) -}}
{{- end -}}

{{/*
The directory of one model's L2 namespace in the engine pods. Input: dict "root" $ "model" <models[] entry>.
*/}}
{{- define "kv-tiered-inference.l2Dir" -}}
{{- printf "%s/%s" .root.Values.cache.l2.mountPath (include "kv-tiered-inference.l2Namespace" .) -}}
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
{{- /* On CPU, vLLM's own KV cache (L0) lives in the same host memory. */ -}}
{{- if eq (.root.Values.engine.accelerator | default "nvidia") "cpu" -}}
{{- $free = subf $free (include "kv-tiered-inference.bytes" .root.Values.engine.cpuKVCacheSpace | float64) -}}
{{- end -}}
{{- $size := floor (divf $free $gib) -}}
{{- if lt $size 1.0 -}}
{{- fail (printf "models[%s]: cache.l1.size auto leaves %.1f GiB for L1 (memory limit %s - /dev/shm %s - headroom %s, and engine.cpuKVCacheSpace on CPU); raise resources.limits.memory, lower engine.shmSize or cache.l1.headroom, or set cache.l1.size" .model.name (divf $free $gib) (toString $limit) (toString .root.Values.engine.shmSize) (toString $l1.headroom)) -}}
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
{{- if include "kv-tiered-inference.recordHits" .root }}
{{- /* The same fs connector and files, loaded through LMCache's remote storage plugin framework as
l2_hits.py's subclass, which records each hit as the chunk's atime (docs/eviction.md). */}}
remote_storage_plugins: [kvtier_l2]
remote_serde: naive
extra_config:
  remote_storage_plugin.kvtier_l2.module_path: l2_hits
  remote_storage_plugin.kvtier_l2.class_name: HitRecordingFSConnector
  remote_storage_plugin.kvtier_l2.base_path: {{ include "kv-tiered-inference.l2Dir" . | quote }}
  remote_storage_plugin.kvtier_l2.hit_interval_s: {{ $cache.l2.eviction.hitIntervalSeconds }}
{{- else if $cache.l2.enabled }}
remote_url: {{ include "kv-tiered-inference.remoteUrl" . | quote }}
remote_serde: naive
{{- end }}
{{- end -}}

{{/*
"true" when the engines record L2 hits (cache.l2.eviction.recordHits, standalone target, L2 on).
*/}}
{{- define "kv-tiered-inference.recordHits" -}}
{{- $l2 := .Values.cache.l2 -}}
{{- if and (eq .Values.target "standalone") $l2.enabled $l2.eviction.recordHits -}}true{{- end -}}
{{- end -}}

{{/*
Where the engines import l2_hits.py from (the podscripts ConfigMap) when they record hits.
*/}}
{{- define "kv-tiered-inference.podscriptsMountPath" -}}/opt/kvtier/podscripts{{- end -}}

{{/*
The L2 namespace directories of every model this release deploys, one per line (the eviction job's live
list; kv-tiered-inference.l2Namespace, the same on both targets).
*/}}
{{- define "kv-tiered-inference.liveNamespaces" -}}
{{- range $i, $model := .Values.models }}
{{- if $i }}{{ "\n" }}{{ end }}
{{- include "kv-tiered-inference.l2Namespace" (dict "root" $ "model" $model) }}
{{- end }}
{{- end -}}
