{{/* Chart name, or nameOverride. */}}
{{- define "curvine.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* <release>-<name>, or fullnameOverride; the release name alone when it already contains the name. */}}
{{- define "curvine.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "curvine.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
A name that keeps its suffix at any length: the base is cut first (and a trailing "-" dropped), then the
suffix is appended, so a long name never cuts off "-master" or makes two components' names equal.
Call with (dict "base" <prefix> "suffix" <"-..."> "max" <limit>).
*/}}
{{- define "curvine.suffixedName" -}}
{{- printf "%s%s" (.base | trunc (max 1 (sub (int .max) (len .suffix)) | int) | trimSuffix "-") .suffix -}}
{{- end -}}

{{/*
Selector labels: name + instance only, so other labels never touch immutable selectors. Each
component gets its own name (<chart>-master, <chart>-worker, ...) so selectors never overlap.
Call with (dict "root" $ "component" "master").
*/}}
{{- define "curvine.selectorLabels" -}}
app.kubernetes.io/name: {{ include "curvine.suffixedName" (dict "base" (include "curvine.name" .root) "suffix" (printf "-%s" .component) "max" 63) | quote }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{/*
Pod template labels: no chart or app version, so a chart release that changes nothing in a pod does
not restart it (the CSI node plugin serves live FUSE mounts).
*/}}
{{- define "curvine.podLabels" -}}
{{ include "curvine.selectorLabels" . }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: {{ include "curvine.name" .root | quote }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Labels of every object: selector labels + component, version, chart, commonLabels. */}}
{{- define "curvine.labels" -}}
{{ include "curvine.selectorLabels" . }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: {{ include "curvine.name" .root | quote }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
An int-or-string value (maxUnavailable: 2 or "25%"). Helm holds every number as a float64, which prints
as 1e+06 from a million up: a number is printed as an integer, a string as it is.
*/}}
{{- define "curvine.intOrString" -}}
{{- if kindIs "string" . }}{{ . | quote }}{{ else }}{{ . | int64 }}{{ end -}}
{{- end -}}

{{/*
One image reference: global.imageRegistry > image.registry; digest beats tag; empty tag -> v<appVersion>.
Call with (dict "image" .Values.image "root" $).
*/}}
{{- define "curvine.image" -}}
{{- $registry := .image.registry -}}
{{- with .root.Values.global }}{{ if .imageRegistry }}{{ $registry = .imageRegistry }}{{ end }}{{ end -}}
{{- /* A registry written with a trailing "/" (my.reg.io/) would leave an empty path component, which
distribution/reference v0.6.0's grammar (reference.go: path-component ['/' path-component]*) and so the
kubelet refuse (InvalidImageName); the slash can only mean the separator the join adds. */ -}}
{{- $registry = regexReplaceAll "/+$" ($registry | default "") "" -}}
{{- $repo := .image.repository -}}
{{- if $registry }}{{ $repo = printf "%s/%s" $registry .image.repository }}{{ end -}}
{{- if .image.digest -}}
{{- printf "%s@%s" $repo .image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (default (printf "v%s" .root.Chart.AppVersion) .image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Pull secrets of every pod (global first, then the chart's own), or nothing. */}}
{{- define "curvine.imagePullSecrets" -}}
{{- $secrets := list -}}
{{- with .Values.global }}{{ with .imagePullSecrets }}{{ $secrets = concat $secrets . }}{{ end }}{{ end -}}
{{- $secrets = concat $secrets .Values.imagePullSecrets | uniq -}}
{{- with $secrets -}}
imagePullSecrets:
{{- toYaml . | nindent 2 }}
{{- end -}}
{{- end -}}

{{/* Names of the objects other templates refer to. */}}
{{- /* 45 + "-master" = 52: a StatefulSet's pods carry a label of its name plus a revision hash (<= 63). */ -}}
{{- define "curvine.masterName" -}}{{ include "curvine.fullname" . | trunc 45 | trimSuffix "-" }}-master{{- end -}}
{{- define "curvine.workerName" -}}{{ include "curvine.fullname" . }}-worker{{- end -}}
{{- define "curvine.configName" -}}{{ include "curvine.fullname" . }}-config{{- end -}}
{{- define "curvine.csiName" -}}{{ include "curvine.fullname" . }}-csi{{- end -}}
{{- define "curvine.storageClassName" -}}{{ default (printf "%s-curvine" .Release.Name) .Values.storageClass.name }}{{- end -}}
{{- define "curvine.pvcName" -}}{{ default (printf "%s-curvine-l2cache" .Release.Name) .Values.pvc.name }}{{- end -}}

{{/* Stable DNS name of master <index>: <pod>.<headless service>.<namespace>.svc.<domain>. */}}
{{- define "curvine.masterHost" -}}
{{- printf "%s-%d.%s.%s.svc.%s" (include "curvine.masterName" .root) (int .index) (include "curvine.masterName" .root) .root.Release.Namespace .root.Values.clusterDomain -}}
{{- end -}}

{{/* Comma-separated host:rpcPort of every master (StorageClass master-addrs, client CLI). */}}
{{- define "curvine.masterAddrs" -}}
{{- $addrs := list -}}
{{- range $i := until (int .Values.master.replicas) -}}
{{- $addrs = append $addrs (printf "%s:%d" (include "curvine.masterHost" (dict "root" $ "index" $i)) (int $.Values.master.ports.rpc)) -}}
{{- end -}}
{{- join "," $addrs -}}
{{- end -}}

{{/* Meta and journal directories: always inside a subdirectory of the volume, never its root. */}}
{{- define "curvine.masterDataDir" -}}
{{- printf "%s/%s" (trimSuffix "/" .Values.master.persistence.mountPath) .Values.master.persistence.subDirectory -}}
{{- end -}}

{{/* `[TYPE:capacity]path` entries of worker.data_dir. */}}
{{- define "curvine.dataDirEntry" -}}
{{- if .capacity -}}
{{- printf "[%s:%s]%s" .type .capacity .path -}}
{{- else -}}
{{- printf "[%s]%s" .type .path -}}
{{- end -}}
{{- end -}}

{{/*
Refuse values Helm's schema cannot express. Raft needs an odd member count; the schema already
limits replicas to 1/3/5, this check gives the reason in words (and guards --disable-openapi-validation).
*/}}
{{- define "curvine.validate" -}}
{{- $n := int .Values.master.replicas -}}
{{- if eq (mod $n 2) 0 -}}
{{- fail (printf "[curvine-masters-odd] master.replicas: %d: Curvine masters form a Raft group and need an odd count (1, 3 or 5); an even count cannot keep quorum through one failure. Use 3." $n) -}}
{{- end -}}
{{- if or (lt $n 1) (gt $n 5) -}}
{{- fail (printf "[curvine-masters-odd] master.replicas: %d: supported master counts are 1, 3 and 5." $n) -}}
{{- end -}}
{{- range $key := list "runAsUser" "runAsGroup" -}}
{{- if hasKey ($.Values.csi.controller.podSecurityContext | default dict) $key -}}
{{- fail (printf "[curvine-csi-controller-identity] csi.controller.podSecurityContext.%s: it is set: the CSI controller runs as csi.volumeAccess.uid/gid, because it owns every volume directory it creates. Set csi.volumeAccess instead." $key) -}}
{{- end -}}
{{- end -}}
{{- $paths := dict -}}
{{- range .Values.worker.dataDirs -}}
{{- if hasKey $paths .path -}}
{{- fail (printf "[curvine-data-dirs-unique] worker.dataDirs: path %s is listed twice; each data dir needs its own path." .path) -}}
{{- end -}}
{{- $_ := set $paths .path true -}}
{{- end -}}
{{- $read := .Values.config.read -}}
{{- $chunk := include "curvine.sizeBytes" $read.chunkSize | int64 -}}
{{- $cap := 16777216 -}}
{{- if gt $chunk $cap -}}
{{- fail (printf "[curvine-read-chunk-cap] config.read.chunkSize: %s is %d bytes: Curvine v0.4.1 workers refuse a read chunk above 16777216 bytes (16MB). Use 16MB or less." $read.chunkSize $chunk) -}}
{{- end -}}
{{- /* The worker checks the prefetch length (chunk x num) only when prefetch is on: chunkNum > 1. */ -}}
{{- if and (gt (int $read.chunkNum) 1) (gt (mul $chunk (int $read.chunkNum)) $cap) -}}
{{- fail (printf "[curvine-read-chunk-cap] config.read: chunkSize %s x chunkNum %d is %d bytes: Curvine v0.4.1 workers refuse a prefetch above 16777216 bytes (16MB), and a cross-node read fails. Lower chunkNum to %d or less, or chunkSize." $read.chunkSize (int $read.chunkNum) (mul $chunk (int $read.chunkNum)) (div $cap $chunk)) -}}
{{- end -}}
{{- end -}}

{{/* Bytes of a Curvine size string (128KB, 1M, 4mb: binary units, as Curvine's ByteUnit reads them). */}}
{{- define "curvine.sizeBytes" -}}
{{- $text := upper (toString .) | trim -}}
{{- $num := regexFind "^[0-9]+" $text | int64 -}}
{{- $unit := regexReplaceAll "^[0-9]+\\s*" $text "" | trimSuffix "B" -}}
{{- $scale := get (dict "" 1 "K" 1024 "M" 1048576 "G" 1073741824) $unit | default 0 -}}
{{- mul $num $scale -}}
{{- end -}}
