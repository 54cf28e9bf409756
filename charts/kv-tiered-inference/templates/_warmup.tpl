{{/* The L2 warm-up (cache.warmup; docs/warmup.md): its checks, names and the prefixes each model lists. */}}

{{/*
The names of the models with at least one listed prefix, after the warm-up's refusals, as a JSON list
(callers range over .Values.models and keep these: the entries themselves never go through JSON, whose
numbers would come back as floats). Input: root.
*/}}
{{- define "kv-tiered-inference.warmupModels" -}}
{{- $listed := dict -}}
{{- range $name, $prefixes := .Values.cache.warmup.prefixes -}}
{{- if $prefixes -}}
{{- $_ := set $listed $name $prefixes -}}
{{- end -}}
{{- end -}}
{{- $warmed := list -}}
{{- if $listed -}}
{{- if ne .Values.target "standalone" -}}
{{- fail "[warmup-target] cache.warmup.prefixes: the warm-up Job needs the engine pods and Service the chart renders on target standalone; on hyperpod the operator renders them (leave cache.warmup.prefixes empty there)" -}}
{{- end -}}
{{- if not .Values.cache.l2.enabled -}}
{{- fail "[warmup-target] cache.warmup.prefixes: cache.l2.enabled is false, so there is no shared tier to warm (each replica's L1 is its own): enable L2 or leave cache.warmup.prefixes empty" -}}
{{- end -}}
{{- $byName := dict -}}
{{- range .Values.models }}{{ $_ := set $byName .name . }}{{ end -}}
{{- range $name := keys $listed | sortAlpha -}}
{{- $model := get $byName $name -}}
{{- if not $model -}}
{{- fail (printf "[warmup-model] cache.warmup.prefixes.%s: no models[] entry is named %q (models: %s); key the prefixes by models[].name" $name $name (keys $byName | sortAlpha | join ", ")) -}}
{{- end -}}
{{- if lt (int $model.replicas) 1 -}}
{{- fail (printf "[warmup-model] cache.warmup.prefixes.%s: models[%s].replicas is 0, so no replica can take the warm-up; scale the model up or drop its prefixes" $name $name) -}}
{{- end -}}
{{- $warmed = append $warmed $name -}}
{{- end -}}
{{- end -}}
{{- toJson $warmed -}}
{{- end -}}

{{/* The warm-up hook Job of one model (a Job name is a label value: at most 63). Input: dict "root" "model". */}}
{{- define "kv-tiered-inference.warmupName" -}}
{{- include "kv-tiered-inference.suffixedName" (dict "base" (include "kv-tiered-inference.fullname" .root) "suffix" (printf "-warmup-%s" .model.name) "max" 63) -}}
{{- end -}}

{{/* Where the warm-up pods mount the prefixes ConfigMap, and below it the ConfigMap keys prefixes name. */}}
{{- define "kv-tiered-inference.warmupMountPath" -}}/etc/kvtier-warmup{{- end -}}

{{/*
The prefixes file l2_warm.py reads for one model: {"prefixes": [{name, text|messages|file, cacheSalt}]},
sorted by name; a prefix set to null (removed by a later values file) is left out. Input: dict "root" "model".
*/}}
{{- define "kv-tiered-inference.warmupPrefixes" -}}
{{- $prefixes := get .root.Values.cache.warmup.prefixes .model.name | default dict -}}
{{- $files := printf "%s/files" (include "kv-tiered-inference.warmupMountPath" .) -}}
{{- $out := list -}}
{{- range $name := keys $prefixes | sortAlpha -}}
{{- $p := get $prefixes $name -}}
{{- if $p -}}
{{- $entry := dict "name" $name -}}
{{- if $p.configMap -}}
{{- $_ := set $entry "file" (printf "%s/%s" $files $name) -}}
{{- else if $p.messages -}}
{{- $_ := set $entry "messages" $p.messages -}}
{{- else -}}
{{- $_ := set $entry "text" $p.text -}}
{{- end -}}
{{- with $p.cacheSalt }}{{ $_ := set $entry "cacheSalt" . }}{{ end -}}
{{- $out = append $out $entry -}}
{{- end -}}
{{- end -}}
{{- toJson (dict "prefixes" $out) -}}
{{- end -}}

{{/*
The prefixes the eviction job keeps, one `<namespace>/<prefix>` per line (empty without pinning): a pin
the hook wrote counts only while its prefix is listed here.
*/}}
{{- define "kv-tiered-inference.warmupPins" -}}
{{- if .Values.cache.warmup.pin -}}
{{- $lines := list -}}
{{- $warmed := include "kv-tiered-inference.warmupModels" . | fromJsonArray -}}
{{- range $model := .Values.models -}}
{{- if has $model.name $warmed -}}
{{- $namespace := include "kv-tiered-inference.l2Namespace" (dict "root" $ "model" $model) -}}
{{- range (include "kv-tiered-inference.warmupPrefixes" (dict "root" $ "model" $model) | fromJson).prefixes -}}
{{- $lines = append $lines (printf "%s/%s" $namespace .name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- join "\n" $lines -}}
{{- end -}}
{{- end -}}
