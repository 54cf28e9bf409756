{{/*
Helpers of the HyperPod target (templates/hyperpod-*.yaml). See docs/hyperpod.md for why each exists.
*/}}

{{/* The MutatingAdmissionPolicy API versions, newest first. */}}
{{- define "kv-tiered-inference.hyperpod.policyVersions" -}}
admissionregistration.k8s.io/v1 admissionregistration.k8s.io/v1beta1 admissionregistration.k8s.io/v1alpha1
{{- end -}}

{{/*
The MutatingAdmissionPolicy API version to render: hyperpod.patch.apiVersion when set, else the newest one
the cluster serves; empty when none is served.
*/}}
{{- define "kv-tiered-inference.hyperpod.policyApiVersion" -}}
{{- $patch := .Values.hyperpod.patch -}}
{{- if $patch.apiVersion -}}
{{- $patch.apiVersion -}}
{{- else -}}
{{- $found := "" -}}
{{- range (include "kv-tiered-inference.hyperpod.policyVersions" . | splitList " ") -}}
{{- if and (not $found) ($.Capabilities.APIVersions.Has (printf "%s/MutatingAdmissionPolicy" .)) -}}
{{- $found = . -}}
{{- end -}}
{{- end -}}
{{- $found -}}
{{- end -}}
{{- end -}}

{{/*
Which mechanism carries the patch: "mutatingAdmissionPolicy" or "kyverno"; fails with the remedy when
neither is available. Only called when the HyperPod target has L2 on.
*/}}
{{- define "kv-tiered-inference.hyperpod.mechanism" -}}
{{- $mechanism := .Values.hyperpod.patch.mechanism -}}
{{- $kyverno := .Capabilities.APIVersions.Has "kyverno.io/v1/Policy" -}}
{{- if eq $mechanism "kyverno" -}}
kyverno
{{- else if include "kv-tiered-inference.hyperpod.policyApiVersion" . -}}
mutatingAdmissionPolicy
{{- else if and (eq $mechanism "auto") $kyverno -}}
kyverno
{{- else -}}
{{- fail (printf "[hyperpod-patch-api] hyperpod.patch.mechanism: target hyperpod: this cluster serves no MutatingAdmissionPolicy API (admissionregistration.k8s.io v1, v1beta1 or v1alpha1), which the L2 patch of the operator's Deployments needs%s. Remedies: on Kubernetes >= 1.36 it is served by default; on 1.34/1.35 enable it (feature gate MutatingAdmissionPolicy, runtime-config admissionregistration.k8s.io/v1beta1=true); with helm template or GitOps set hyperpod.patch.apiVersion (e.g. admissionregistration.k8s.io/v1); or install Kyverno and set hyperpod.patch.mechanism=kyverno (docs/hyperpod.md)" (ternary "" (printf " (hyperpod.patch.mechanism=%s)" $mechanism) (eq $mechanism "auto"))) -}}
{{- end -}}
{{- end -}}

{{/*
Where the Curvine L2 PVC is mounted in the container the patch targets: the one place the HyperPod patch
takes the L2 path from (the mount and, in MultiProcess, the --l2-adapter base_path; in InProcess its
LMCACHE_REMOTE_URL comes from the L2 URL helper of _cache.tpl, shared with the standalone target).
*/}}
{{- define "kv-tiered-inference.hyperpod.l2MountPath" -}}
{{- .Values.cache.l2.mountPath -}}
{{- end -}}

{{/* "true" when the operator runs LMCache as a co-located server sidecar (hyperpod.lmcache.mode). */}}
{{- define "kv-tiered-inference.hyperpod.multiProcess" -}}
{{- if eq .Values.hyperpod.lmcache.mode "MultiProcess" -}}true{{- end -}}
{{- end -}}

{{/*
"true" when the MultiProcess LMCache server sidecar loads the bundle's sealed L2 adapter (l2_adapter.py, by
LMCache's `plugin` adapter type) instead of LMCache's `fs` one: target hyperpod, L2 on, cache.l2.integrity.
*/}}
{{- define "kv-tiered-inference.hyperpod.sealedAdapter" -}}
{{- if and (eq .Values.target "hyperpod") (include "kv-tiered-inference.hyperpod.multiProcess" .) .Values.cache.l2.enabled .Values.cache.l2.integrity -}}true{{- end -}}
{{- end -}}

{{/*
The podscripts modules the patched container imports, as a JSON list, empty when none: the L2 plugin in
InProcess mode, the sealed L2 adapter in MultiProcess mode.
*/}}
{{- define "kv-tiered-inference.hyperpod.podscriptsFiles" -}}
{{- if include "kv-tiered-inference.l2Plugin" . -}}
{{- include "kv-tiered-inference.l2PluginFiles" . -}}
{{- else if include "kv-tiered-inference.hyperpod.sealedAdapter" . -}}
{{- include "kv-tiered-inference.l2AdapterFiles" . -}}
{{- end -}}
{{- end -}}

{{/* The patched container's pod template annotation over the modules it imports (podscriptsFiles). */}}
{{- define "kv-tiered-inference.hyperpod.podscriptsChecksum" -}}
{{- include "kv-tiered-inference.podscriptsChecksum" (prepend (include "kv-tiered-inference.hyperpod.podscriptsFiles" . | fromJsonArray) .) -}}
{{- end -}}

{{/*
The container of the operator's Deployment that holds LMCache's L1/L2 configuration, as a CEL expression:
the vLLM container, named like the Deployment, in InProcess mode; the LMCache server sidecar, by its
name, in MultiProcess mode.
*/}}
{{- define "kv-tiered-inference.hyperpod.cacheContainerCel" -}}
{{- if include "kv-tiered-inference.hyperpod.multiProcess" . -}}
{{- .Values.hyperpod.lmcache.serverContainerName | toJson -}}
{{- else -}}
object.metadata.name
{{- end -}}
{{- end -}}

{{/*
Each endpoint's L2 namespace (l2Namespace of _cache.tpl) as a CEL expression on the Deployment the patch
is writing: a map literal {endpoint name: value} indexed by object.metadata.name (the matchConditions
admit only this release's endpoints). Every endpoint's model argument is /opt/ml/model, so one directory
for all would let two models read each other's chunks. Input: dict "root" $ "value" "l2env"|"adapter".
l2env: the value of the InProcess variable l2EnvName names (the LMCache remote_url, or the L2 plugin's
extra_config JSON); adapter: MultiProcess's `--l2-adapter` JSON (LMCache >= 0.5's server takes its L2 from
that argument, not from LMCACHE_* variables): the bundle's sealed adapter (sealedAdapter) or LMCache's
filesystem adapter on the namespace.
*/}}
{{- define "kv-tiered-inference.hyperpod.l2ByEndpointCel" -}}
{{- $root := .root -}}
{{- $byEndpoint := dict -}}
{{- range $root.Values.models -}}
{{- $model := dict "root" $root "model" . -}}
{{- if eq $.value "adapter" -}}
{{- $path := printf "%s/%s" (include "kv-tiered-inference.hyperpod.l2MountPath" $root) (include "kv-tiered-inference.l2Namespace" $model) -}}
{{- $adapter := dict "type" "fs" "base_path" $path -}}
{{- if include "kv-tiered-inference.hyperpod.sealedAdapter" $root -}}
{{- $adapter = dict "type" "plugin" "module_path" "l2_adapter" "class_name" "KvtierSealedFSL2Adapter" "adapter_params" (dict "base_path" $path) -}}
{{- end -}}
{{- $_ := set $byEndpoint .name (toJson $adapter) -}}
{{- else -}}
{{- $_ := set $byEndpoint .name (include "kv-tiered-inference.hyperpod.l2EnvValue" $model) -}}
{{- end -}}
{{- end -}}
{{- printf "%s[object.metadata.name]" (toJson $byEndpoint) -}}
{{- end -}}

{{/*
The InProcess variable that carries each endpoint's L2 (l2ByEndpointCel "l2env"): LMCACHE_EXTRA_CONFIG with
the bundle's L2 plugin (cache.l2.integrity or recordHits; LMCache reads remote_storage_plugins and
extra_config from LMCACHE_* variables as from its config file), else LMCACHE_REMOTE_URL (LMCache's own fs
connector).
*/}}
{{- define "kv-tiered-inference.hyperpod.l2EnvName" -}}
{{- ternary "LMCACHE_EXTRA_CONFIG" "LMCACHE_REMOTE_URL" (not (empty (include "kv-tiered-inference.l2Plugin" .))) -}}
{{- end -}}

{{/*
One endpoint's value of the variable l2EnvName names: the L2 plugin's extra_config JSON, else LMCache's
remote_url. Input: dict "root" $ "model" <models[] entry>.
*/}}
{{- define "kv-tiered-inference.hyperpod.l2EnvValue" -}}
{{- if include "kv-tiered-inference.l2Plugin" .root -}}
{{- include "kv-tiered-inference.l2PluginConfig" . -}}
{{- else -}}
{{- include "kv-tiered-inference.remoteUrl" . -}}
{{- end -}}
{{- end -}}

{{/* The pod volume of the podscripts ConfigMap the patched container imports from (podscriptsFiles). */}}
{{- define "kv-tiered-inference.hyperpod.podscriptsVolume" -}}kvtier-podscripts{{- end -}}

{{/*
A CEL condition on an argument `a`: it is an --l2-adapter JSON the patch writes, the sealed adapter's or
LMCache's fs adapter's, on a namespace under the L2 mount (toJson sorts keys, so each starts alike): to
find a stale one, whichever of the two an earlier release wrote.
*/}}
{{- define "kv-tiered-inference.hyperpod.ourL2AdapterCel" -}}
{{- $mount := printf "%s/" (include "kv-tiered-inference.hyperpod.l2MountPath" .) | toJson | trimSuffix "\"" -}}
{{- printf "(a.startsWith(%s) || a.startsWith(%s))" (printf "{\"base_path\":%s" $mount | toJson) (printf "{\"adapter_params\":{\"base_path\":%s" $mount | toJson) -}}
{{- end -}}

{{/*
Refuses what the operator of hyperpod.operator.version rejects or silently drops (validate rules
hyperpod-operator-supports and hyperpod-multiprocess-lmcache say the same before rendering).
*/}}
{{- define "kv-tiered-inference.hyperpod.checkOperator" -}}
{{- $hp := .Values.hyperpod -}}
{{- $version := printf "%s.0" (toString $hp.operator.version) -}}
{{- if and (include "kv-tiered-inference.hyperpod.multiProcess" .) (semverCompare "<3.7.0" $version) -}}
{{- fail (printf "[hyperpod-operator-supports] hyperpod.lmcache.mode: MultiProcess needs operator >= 3.7 (hyperpod.operator.version is %s): upgrade the operator and set hyperpod.operator.version, or use InProcess" (toString $hp.operator.version)) -}}
{{- end -}}
{{- if and $hp.tolerations (semverCompare "<3.7.0" $version) -}}
{{- fail (printf "[hyperpod-operator-supports] hyperpod.tolerations: hyperpod.tolerations needs operator >= 3.7 (hyperpod.operator.version is %s); older operators drop them silently" (toString $hp.operator.version)) -}}
{{- end -}}
{{- if .Values.auth.apiKeySecret.name -}}
{{- fail "[hyperpod-api-key] auth.apiKeySecret: on target hyperpod the operator renders the engine pods, which this chart cannot give the key; leave auth.apiKeySecret.name empty and authenticate at the endpoint's gateway (docs/security.md)" -}}
{{- end -}}
{{- $cache := .Values.cache -}}
{{- if and $cache.tenantIsolation (eq $cache.backend "lmcache") (not (include "kv-tiered-inference.hyperpod.multiProcess" .)) (or $cache.l1.enabled $cache.l2.enabled) -}}
{{- fail "[hyperpod-tenant-isolation] cache.tenantIsolation: the operator's InProcess LMCache connector keys L1/L2 chunks on tokens alone, so one tenant's cache_salt does not keep another from reading its KV; use hyperpod.lmcache.mode MultiProcess (its keys carry the salt), or set cache.tenantIsolation=false for a release that serves one tenant (docs/security.md)" -}}
{{- end -}}
{{- $tag := toString $hp.worker.image.tag -}}
{{- if and (include "kv-tiered-inference.hyperpod.multiProcess" .) (regexMatch "^v?[0-9]+[.][0-9]+[.][0-9]+$" $tag) (semverCompare "<0.5.0" (trimPrefix "v" $tag)) -}}
{{- fail (printf "[hyperpod-multiprocess-lmcache] hyperpod.worker.image.tag: hyperpod.lmcache.mode MultiProcess needs LMCache >= 0.5.0 in the worker image; hyperpod.worker.image.tag is %s" $tag) -}}
{{- end -}}
{{- end -}}

{{/* Whether the patch is needed: HyperPod target with the shared L2 on. */}}
{{- define "kv-tiered-inference.hyperpod.patchEnabled" -}}
{{- if and (eq .Values.target "hyperpod") .Values.cache.l2.enabled -}}true{{- end -}}
{{- end -}}

{{/*
The environment the patch sets on the cache container alike for every endpoint, as a JSON list of
{name, value}; the variable l2EnvName names, per endpoint, is set next to it (l2ByEndpointCel). LMCache
loads the L2 plugin by name; Python imports it, or the sealed adapter, from the podscripts ConfigMap
(PYTHONPATH).
*/}}
{{- define "kv-tiered-inference.hyperpod.patchEnv" -}}
{{- $env := list
  (dict "name" "LMCACHE_REMOTE_SERDE" "value" "naive")
  (dict "name" "LMCACHE_CHUNK_SIZE" "value" (toString .Values.cache.chunkSize))
  (dict "name" "LMCACHE_PRE_CACHING_HASH_ALGORITHM" "value" (toString .Values.cache.hashAlgorithm))
  (dict "name" "PYTHONHASHSEED" "value" (toString .Values.cache.hashSeed)) -}}
{{- if include "kv-tiered-inference.l2Plugin" . -}}
{{- $env = append $env (dict "name" "LMCACHE_REMOTE_STORAGE_PLUGINS" "value" (include "kv-tiered-inference.l2PluginName" .)) -}}
{{- end -}}
{{- if include "kv-tiered-inference.hyperpod.podscriptsFiles" . -}}
{{- $env = append $env (dict "name" "PYTHONPATH" "value" (include "kv-tiered-inference.podscriptsMountPath" .)) -}}
{{- end -}}
{{- toJson $env -}}
{{- end -}}

{{/*
Names the patch owns in the container's env: those it sets plus those it removes (JSON list). The operator's
LMCACHE_REMOTE_URL goes whichever variable carries the endpoint's L2.
*/}}
{{- define "kv-tiered-inference.hyperpod.managedEnvNames" -}}
{{- $names := list "LMCACHE_REMOTE_URL" (include "kv-tiered-inference.hyperpod.l2EnvName" .) -}}
{{- range (include "kv-tiered-inference.hyperpod.patchEnv" . | fromJsonArray) -}}
{{- $names = append $names .name -}}
{{- end -}}
{{- toJson (concat $names (.Values.hyperpod.patch.removeEnv | default list) | uniq) -}}
{{- end -}}

{{/* Endpoint (= InferenceEndpointConfig = Deployment) names of this release, as a JSON list. */}}
{{- define "kv-tiered-inference.hyperpod.endpointNames" -}}
{{- $names := list -}}
{{- range .Values.models -}}
{{- $names = append $names .name -}}
{{- end -}}
{{- toJson $names -}}
{{- end -}}

{{/* Cluster-scoped object name for this release's patch (namespace + release, so two releases coexist). */}}
{{- define "kv-tiered-inference.hyperpod.policyName" -}}
{{- printf "%s-%s-hyperpod-l2" .Release.Namespace .Release.Name | trunc 253 | trimSuffix "-" -}}
{{- end -}}

{{/*
spec.modelSourceConfig of one model. Input: dict "model" <models[] entry>. HyperPod takes Hugging Face, S3
or FSx; a pvc source has no equivalent there.
*/}}
{{- define "kv-tiered-inference.hyperpod.modelSource" -}}
{{- $m := .model -}}
{{- $src := $m.source | default dict -}}
{{- if hasKey $src "huggingface" }}
{{- $hf := $src.huggingface | default dict }}
modelSourceType: huggingface
huggingFaceModel:
  modelId: {{ $m.model | quote }}
  {{- with $hf.revision }}
  {{- if not (regexMatch "^[0-9a-f]{40}$" .) }}
  {{- fail (printf "[hyperpod-revision-sha] models[%s].source.huggingface.revision: %q: target hyperpod takes a full 40-character commit SHA (the operator's commitSHA), not a branch or tag" $m.name .) }}
  {{- end }}
  commitSHA: {{ . | quote }}
  {{- end }}
  {{- if ($hf.tokenSecret | default dict).name }}
  tokenSecretRef:
    name: {{ $hf.tokenSecret.name | quote }}
    key: {{ $hf.tokenSecret.key | default "token" | quote }}
  {{- end }}
{{- else if hasKey $src "s3" }}
modelSourceType: s3
s3Storage:
  bucketName: {{ $src.s3.bucket | quote }}
  region: {{ $src.s3.region | quote }}
{{- with $src.s3.path }}
modelLocation: {{ . | quote }}
{{- end }}
{{- else if hasKey $src "fsx" }}
modelSourceType: fsx
fsxStorage:
  fileSystemId: {{ $src.fsx.fileSystemId | quote }}
  {{- with $src.fsx.dnsName }}
  dnsName: {{ . | quote }}
  {{- end }}
  {{- with $src.fsx.mountName }}
  mountName: {{ . | quote }}
  {{- end }}
{{- with $src.fsx.path }}
modelLocation: {{ . | quote }}
{{- end }}
{{- else -}}
{{- fail (printf "[model-source-target] models[%s].source: target hyperpod needs source.huggingface, source.s3 or source.fsx (the operator downloads or mounts the model itself); a pvc source is only supported by target standalone" $m.name) -}}
{{- end }}
{{- end -}}

{{/* vLLM arguments of one model (after the model path the operator's image expects first). Input: dict "model" "root". */}}
{{- define "kv-tiered-inference.hyperpod.workerArgs" -}}
{{- $m := .model -}}
{{- $v := .root.Values -}}
{{- include "kv-tiered-inference.checkExtraArgs" . -}}
{{- $args := list $v.hyperpod.worker.modelMountPath "--served-model-name" $m.model "--port" (toString $v.hyperpod.worker.port) -}}
{{- if $v.cache.l0.enabled -}}
{{- $args = append $args "--enable-prefix-caching" -}}
{{- else -}}
{{- $args = append $args "--no-enable-prefix-caching" -}}
{{- end -}}
{{- with $m.dtype }}{{ $args = concat $args (list "--dtype" .) }}{{ end -}}
{{- with $m.maxModelLen }}{{ $args = concat $args (list "--max-model-len" (toString .)) }}{{ end -}}
{{- with $m.gpuMemoryUtilization }}{{ $args = concat $args (list "--gpu-memory-utilization" (toString .)) }}{{ end -}}
{{- with $m.gpusPerReplica }}{{ $args = concat $args (list "--tensor-parallel-size" (toString .)) }}{{ end -}}
{{- toJson (concat $args ($m.extraArgs | default list)) -}}
{{- end -}}
