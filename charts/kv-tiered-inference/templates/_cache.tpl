{{/*
The KV cache tiers: L1 sizing, the L2 claim and its StorageClass, and what each backend is given (the LMCache
config, or the native OffloadingConnector's configuration). The cross-pod invariants (chunk size, hash
algorithm, serde, L2 directory) are written here once and read by every template that needs them.
*/}}

{{/*
Bytes of a Kubernetes quantity (1Gi, 500G, 1.5Ti, 2048Mi, 123), as a float64. Fails on anything else,
naming the values key. Input: list <quantity> <values key path>.
*/}}
{{- define "kv-tiered-inference.bytes" -}}
{{- $q := toString (index . 0) -}}
{{- if not (regexMatch "^[0-9]+(\\.[0-9]+)?([kMGTP]|[KMGTP]i)?$" $q) -}}
{{- fail (printf "[quantity-format] %s: %q: expected a size such as 110Gi, 96G or 1024Mi" (index . 1) $q) -}}
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
{{- fail "[l2-backend] cache.l2.claim: curvine.enabled is false, so the L2 PVC needs an existing Curvine: set cache.l2.claim.existingClaim (an RWX PVC) or cache.l2.claim.storageClassName (the external Curvine StorageClass)" -}}
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
{{- fail "[l2-writable-by-engines] engine.podSecurityContext.runAsUser: it is unset, so the engines' UID is the image's and the chart cannot give them the L2: set it (and curvine.csi.volumeAccess.uid to the same value), or curvine.csi.volumeAccess.mode=world to let any UID write" -}}
{{- end -}}
{{- if ne $mode "world" -}}
{{- $groups := $pod.supplementalGroups | default list -}}
{{- if hasKey $pod "runAsGroup" }}{{ $groups = append $groups $pod.runAsGroup }}{{ end -}}
{{- if hasKey $pod "fsGroup" }}{{ $groups = append $groups $pod.fsGroup }}{{ end -}}
{{- $ownerOk := eq (int $pod.runAsUser) (int $access.uid) -}}
{{- $groupOk := false -}}
{{- range $groups }}{{ if and (eq $mode "group") (eq (int .) (int $access.gid)) }}{{ $groupOk = true }}{{ end }}{{ end -}}
{{- if not (or $ownerOk $groupOk) -}}
{{- fail (printf "[l2-writable-by-engines] curvine.csi.volumeAccess: engine.podSecurityContext (runAsUser %v, runAsGroup %v, fsGroup %v) cannot write the L2: curvine.csi.volumeAccess creates each volume directory as %v:%v with mode %s. Set curvine.csi.volumeAccess.uid to engine.podSecurityContext.runAsUser and gid to its fsGroup, or mode=world to let any UID write" $pod.runAsUser (dig "runAsGroup" "unset" $pod) (dig "fsGroup" "unset" $pod) $access.uid $access.gid (get (dict "owner" "0755 (owner)" "group" "0775 (group)") $mode)) -}}
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
  "accelerator" ($v.engine.accelerator | default "nvidia")
  "salt" (toString ($v.cache.l2.namespaceSalt | default "")) -}}
{{- /* LMCache's identity is unchanged from before backends existed, so upgrades keep their namespaces. vLLM's
fs tier keys its own directory on model argument, dtype, block sizes and layers, but not on weights, revision,
its own version or (for layouts it calls parallelism-agnostic) TP: those stay here (docs/backends.md). */ -}}
{{- if eq (include "kv-tiered-inference.backend" $v) "vllm-native" -}}
{{- $_ := set $identity "backend" "vllm-native" -}}
{{- $_ := set $identity "vllm" (toString $v.cache.vllmVersion) -}}
{{- /* Sealed native files (a trailer page each, l2_native.py): a namespace of their own, as LMCache's. */ -}}
{{- if include "kv-tiered-inference.nativeSealedTier" .root -}}
{{- $_ := set $identity "chunkFiles" "sealed" -}}
{{- end -}}
{{- else -}}
{{- $_ := set $identity "lmcache" (toString $v.cache.lmcacheVersion) -}}
{{- /* Sealed files (cache.l2.integrity) get a namespace of their own: the verifying engines would refuse
every unsealed file of before, and engines of the previous revision keep theirs during a rollout; the
eviction job removes the old namespace once it is dead. */ -}}
{{- if or (and (include "kv-tiered-inference.l2Plugin" .root) $v.cache.l2.integrity) (include "kv-tiered-inference.hyperpod.sealedAdapter" .root) -}}
{{- $_ := set $identity "chunkFiles" "sealed" -}}
{{- end -}}
{{- end -}}
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
{{- fail (printf "[l1-auto-needs-memory-limit] models[%s].resources.limits.memory: cache.l1.size is auto, which needs resources.limits.memory on the model (L1 = limit - engine.shmSize - cache.l1.headroom); set the limit or a number of GB in cache.l1.size" .model.name) -}}
{{- end -}}
{{- $gib := 1073741824.0 -}}
{{- $free := subf (subf (include "kv-tiered-inference.bytes" (list $limit (printf "models[%s].resources.limits.memory" .model.name)) | float64) (include "kv-tiered-inference.bytes" (list .root.Values.engine.shmSize "engine.shmSize") | float64)) (include "kv-tiered-inference.bytes" (list $l1.headroom "cache.l1.headroom") | float64) -}}
{{- /* On CPU, vLLM's own KV cache (L0) lives in the same host memory. */ -}}
{{- if eq (.root.Values.engine.accelerator | default "nvidia") "cpu" -}}
{{- $free = subf $free (include "kv-tiered-inference.bytes" (list .root.Values.engine.cpuKVCacheSpace "engine.cpuKVCacheSpace") | float64) -}}
{{- end -}}
{{- $size := floor (divf $free $gib) -}}
{{- if lt $size 1.0 -}}
{{- fail (printf "[l1-fits-memory] models[%s].resources.limits.memory: cache.l1.size auto leaves %.1f GiB for L1 (memory limit %s - /dev/shm %s - headroom %s, and engine.cpuKVCacheSpace on CPU); raise resources.limits.memory, lower engine.shmSize or cache.l1.headroom, or set cache.l1.size" .model.name (divf $free $gib) (toString $limit) (toString .root.Values.engine.shmSize) (toString $l1.headroom)) -}}
{{- end -}}
{{- $size | int -}}
{{- end -}}
{{- end -}}

{{/* The cache backend: `lmcache` or `vllm-native` (cache.backend). Input: .Values. */}}
{{- define "kv-tiered-inference.backend" -}}
{{- .cache.backend | default "lmcache" -}}
{{- end -}}

{{/* Whether the engines offload KV at all (L1 or L2 on), whatever the backend. */}}
{{- define "kv-tiered-inference.offloadEnabled" -}}
{{- if or .Values.cache.l1.enabled .Values.cache.l2.enabled -}}true{{- end -}}
{{- end -}}

{{/* Whether LMCache is used (L1 or L2 on, backend lmcache; the HyperPod target always uses it). */}}
{{- define "kv-tiered-inference.lmcacheEnabled" -}}
{{- if and (include "kv-tiered-inference.offloadEnabled" .) (eq (include "kv-tiered-inference.backend" .Values) "lmcache") -}}true{{- end -}}
{{- end -}}

{{/* Whether vLLM's native offloading is used (L1 or L2 on, backend vllm-native, standalone target). */}}
{{- define "kv-tiered-inference.nativeEnabled" -}}
{{- if and (include "kv-tiered-inference.offloadEnabled" .) (eq (include "kv-tiered-inference.backend" .Values) "vllm-native") -}}true{{- end -}}
{{- end -}}

{{/*
Refuse what a backend cannot do, naming the key to change. The HyperPod operator renders LMCache only; vLLM's
fs tier reaches L2 through its CPU tier (a chunk is read into, and written from, a CPU-tier slot); the hit
recorder is an LMCache storage plugin; each backend names its prefix hash functions differently.
*/}}
{{- define "kv-tiered-inference.backendCheck" -}}
{{- $cache := .Values.cache -}}
{{- $backend := include "kv-tiered-inference.backend" .Values -}}
{{- if eq $backend "vllm-native" -}}
{{- if eq .Values.target "hyperpod" -}}
{{- fail "[backend-target] cache.backend: vllm-native: the HyperPod Inference Operator renders LMCache's connector only; use cache.backend lmcache on target hyperpod (or target standalone)" -}}
{{- end -}}
{{- if and $cache.l2.enabled (not $cache.l1.enabled) -}}
{{- fail "[backend-l2-needs-l1] cache.l1.enabled: cache.backend vllm-native: the fs tier (L2) moves every chunk through the CPU tier (L1); set cache.l1.enabled true, or cache.l2.enabled false" -}}
{{- end -}}
{{- if $cache.l2.eviction.recordHits -}}
{{- fail "[backend-record-hits] cache.l2.eviction.recordHits: the hit recorder is an LMCache storage plugin; with cache.backend vllm-native set it false (eviction then orders chunks by write time)" -}}
{{- end -}}
{{- if not (has $cache.hashAlgorithm (list "sha256" "sha256_cbor" "xxhash" "xxhash_cbor")) -}}
{{- fail (printf "[backend-hash-algorithm] cache.hashAlgorithm: %s is LMCache's; with cache.backend vllm-native it is vLLM's --prefix-caching-hash-algo: sha256 (vLLM's default), sha256_cbor, xxhash or xxhash_cbor" $cache.hashAlgorithm) -}}
{{- end -}}
{{- else if hasPrefix "xxhash" $cache.hashAlgorithm -}}
{{- fail (printf "[backend-hash-algorithm] cache.hashAlgorithm: %s is vLLM's; with cache.backend lmcache it is LMCache's pre_caching_hash_algorithm: builtin, sha256, sha256_cbor or sha256_cbor_64bit" $cache.hashAlgorithm) -}}
{{- end -}}
{{- end -}}

{{/*
`--kv-transfer-config` of one model with the native backend: vLLM's OffloadingConnector with its tiering spec,
a CPU tier of L1's size (cpu_bytes_to_use) and, with L2, one `fs` tier rooted in the model's L2 namespace.
`block_size` is the chunk in tokens (cache.chunkSize). With cache.l2.integrity the fs tier is the bundle's sealed
one (l2_native.py, vLLM's fs tier whose files carry a checksum page), loaded by vLLM from the podscripts
ConfigMap by `module_path`. `engine_id` names the CPU tier's region in /dev/shm
(`vllm_offload_<engine_id>.mmap`): vLLM draws a new one per start and leaves the region of a killed process
behind, and /dev/shm outlives a container restart, so a fixed per-pod id makes the restarted engine take the
old region over instead of failing for lack of room. Input: dict "root" $ "model" <models[] entry>.
*/}}
{{- define "kv-tiered-inference.nativeTransferConfig" -}}
{{- $cache := .root.Values.cache -}}
{{- $extra := dict "spec_name" "TieringOffloadingSpec" "cpu_bytes_to_use" (include "kv-tiered-inference.l1Bytes" . | int64) "block_size" (int $cache.chunkSize) -}}
{{- if $cache.l2.enabled -}}
{{- $tier := dict "type" "fs" "root_dir" (include "kv-tiered-inference.l2Dir" .) -}}
{{- if include "kv-tiered-inference.nativeSealedTier" .root -}}
{{- $_ := set $tier "type" "KvtierSealedFsTier" -}}
{{- $_ := set $tier "module_path" "l2_native" -}}
{{- end -}}
{{- $_ := set $extra "secondary_tiers" (list $tier) -}}
{{- end -}}
{{- toJson (dict "kv_connector" "OffloadingConnector" "kv_role" "kv_both" "kv_load_failure_policy" ($cache.kvLoadFailurePolicy | default "recompute") "engine_id" "$(POD_NAME)" "kv_connector_extra_config" $extra) -}}
{{- end -}}

{{/* L1 of one model in bytes (whole bytes of l1SizeGiB GiB). Input: dict "root" $ "model" <models[] entry>. */}}
{{- define "kv-tiered-inference.l1Bytes" -}}
{{- mulf (include "kv-tiered-inference.l1SizeGiB" . | float64) 1073741824.0 | floor | int64 -}}
{{- end -}}

{{/*
Size of one model's memory-backed /dev/shm: engine.shmSize, plus L1 with the native backend, whose CPU tier is a
region in /dev/shm (both count against the memory limit either way, so L1 `auto` is the same formula).
Input: dict "root" $ "model" <models[] entry>.
*/}}
{{- define "kv-tiered-inference.shmSizeLimit" -}}
{{- $v := .root.Values -}}
{{- if and (include "kv-tiered-inference.nativeEnabled" .root) $v.cache.l1.enabled -}}
{{- $bytes := addf (include "kv-tiered-inference.bytes" (list $v.engine.shmSize "engine.shmSize") | float64) (include "kv-tiered-inference.l1Bytes" . | float64) -}}
{{- printf "%dMi" (divf $bytes 1048576.0 | ceil | int64) -}}
{{- else -}}
{{- $v.engine.shmSize -}}
{{- end -}}
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
{{- if include "kv-tiered-inference.l2Plugin" .root }}
{{- /* LMCache's fs connector and directory, loaded through LMCache's remote storage plugin framework as
l2_connector.py's subclass: it seals and verifies chunk files (docs/reliability.md) and records each hit
as the chunk's atime (docs/eviction.md). */}}
remote_storage_plugins: [{{ include "kv-tiered-inference.l2PluginName" . }}]
remote_serde: naive
extra_config:
{{- /* Written as chart 0.9 wrote it (this order, names plain, the rest JSON scalars): an unchanged file keeps
the engines' checksum annotation, so an upgrade does not roll them for nothing. */}}
{{- $plugin := include "kv-tiered-inference.l2PluginConfig" . | fromJson }}
{{- range list "module_path" "class_name" "base_path" "verify" "hit_interval_s" }}
{{- $key := printf "remote_storage_plugin.%s.%s" (include "kv-tiered-inference.l2PluginName" $) . }}
{{- if hasKey $plugin $key }}
{{- $value := get $plugin $key }}
  {{ $key }}: {{ if and (kindIs "string" $value) (regexMatch "^[A-Za-z_][A-Za-z0-9_]*$" $value) }}{{ $value }}{{ else }}{{ toJson $value }}{{ end }}
{{- end }}
{{- end }}
{{- else if $cache.l2.enabled }}
remote_url: {{ include "kv-tiered-inference.remoteUrl" . | quote }}
remote_serde: naive
{{- end }}
{{- end -}}

{{/*
"true" when LMCache runs inside the engine and reads its configuration from the chart: the standalone target,
and HyperPod's InProcess mode, where the admission patch sets it as LMCACHE_* variables. In HyperPod's
MultiProcess mode an LMCache server sidecar takes its L2 from `--l2-adapter`, where this plugin does not apply.
*/}}
{{- define "kv-tiered-inference.inProcessLmcache" -}}
{{- if and (include "kv-tiered-inference.lmcacheEnabled" .) (or (eq .Values.target "standalone") (not (include "kv-tiered-inference.hyperpod.multiProcess" .))) -}}true{{- end -}}
{{- end -}}

{{/*
"true" when the engines record L2 hits (cache.l2.eviction.recordHits, L2 on, in-process LMCache).
*/}}
{{- define "kv-tiered-inference.recordHits" -}}
{{- $l2 := .Values.cache.l2 -}}
{{- if and $l2.enabled $l2.eviction.recordHits (include "kv-tiered-inference.inProcessLmcache" .) -}}true{{- end -}}
{{- end -}}

{{/*
Checksum of podscripts files, a pod template annotation: a changed module rolls the pods that import it.
Input: list $ <file name>...
*/}}
{{- define "kv-tiered-inference.podscriptsChecksum" -}}
{{- $root := first . -}}
{{- $files := "" -}}
{{- range rest . }}{{ $files = print $files ($root.Files.Get (printf "files/podscripts/%s" .)) }}{{ end -}}
{{- $files | sha256sum -}}
{{- end -}}

{{/* The modules of each L2 writer the engines import (podscriptsChecksum's file names, JSON lists). */}}
{{- define "kv-tiered-inference.l2PluginFiles" -}}["l2_connector.py","l2_integrity.py","l2_hits.py"]{{- end -}}
{{- define "kv-tiered-inference.nativeTierFiles" -}}["l2_native.py","l2_blocks.py","l2_integrity.py"]{{- end -}}
{{- define "kv-tiered-inference.l2AdapterFiles" -}}["l2_adapter.py","l2_blocks.py","l2_integrity.py"]{{- end -}}

{{/* The name LMCache knows the bundle's L2 plugin by (remote_storage_plugins, its extra_config keys). */}}
{{- define "kv-tiered-inference.l2PluginName" -}}kvtier_l2{{- end -}}

{{/*
The L2 plugin's settings of one model, as LMCache's extra_config (JSON): the LMCache config file on target
standalone, LMCACHE_EXTRA_CONFIG on HyperPod. Input: dict "root" $ "model" <models[] entry>.
*/}}
{{- define "kv-tiered-inference.l2PluginConfig" -}}
{{- $l2 := .root.Values.cache.l2 -}}
{{- $prefix := printf "remote_storage_plugin.%s." (include "kv-tiered-inference.l2PluginName" .) -}}
{{- $config := dict
  (print $prefix "module_path") "l2_connector"
  (print $prefix "class_name") "KvtierFSConnector"
  (print $prefix "base_path") (include "kv-tiered-inference.l2Dir" .)
  (print $prefix "verify") $l2.integrity -}}
{{- if include "kv-tiered-inference.recordHits" .root -}}
{{- $_ := set $config (print $prefix "hit_interval_s") $l2.eviction.hitIntervalSeconds -}}
{{- end -}}
{{- toJson $config -}}
{{- end -}}

{{/*
"true" when the engines load the salt-tagging LMCache connector (cache.tenantIsolation, standalone target,
LMCache): LMCache's own in-process connector keys chunks on tokens alone, so one tenant's KV would serve
another's (docs/security.md).
*/}}
{{- define "kv-tiered-inference.saltConnector" -}}
{{- if and (eq .Values.target "standalone") .Values.cache.tenantIsolation (include "kv-tiered-inference.lmcacheEnabled" .) -}}true{{- end -}}
{{- end -}}

{{/*
"true" when LMCache loads the bundle's L2 plugin (l2_connector.py): to verify chunk files (cache.l2.integrity)
or to record hits; L2 on, in-process LMCache (either target).
*/}}
{{- define "kv-tiered-inference.l2Plugin" -}}
{{- $l2 := .Values.cache.l2 -}}
{{- if and $l2.enabled (include "kv-tiered-inference.inProcessLmcache" .) (or $l2.integrity (include "kv-tiered-inference.recordHits" .)) -}}true{{- end -}}
{{- end -}}

{{/*
"true" when vLLM's native offloading writes L2 through the bundle's sealed fs tier (l2_native.py):
cache.l2.integrity with backend vllm-native and L2 on (the native backend is standalone only).
*/}}
{{- define "kv-tiered-inference.nativeSealedTier" -}}
{{- if and (include "kv-tiered-inference.nativeEnabled" .) .Values.cache.l2.enabled .Values.cache.l2.integrity -}}true{{- end -}}
{{- end -}}

{{/*
"true" when the engines (or HyperPod's LMCache server sidecar) import a module from the podscripts ConfigMap
(the salt connector, the L2 plugin, the sealed native tier, the sealed L2 adapter).
*/}}
{{- define "kv-tiered-inference.enginePodscripts" -}}
{{- if or (include "kv-tiered-inference.saltConnector" .) (include "kv-tiered-inference.l2Plugin" .) (include "kv-tiered-inference.nativeSealedTier" .) (include "kv-tiered-inference.hyperpod.sealedAdapter" .) -}}true{{- end -}}
{{- end -}}

{{/*
Where the engines import the salt connector, the L2 plugin and the sealed native tier from (the podscripts
ConfigMap).
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
