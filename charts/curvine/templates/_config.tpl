{{/*
curvine-cluster.toml. A named template so that pods can hash it (checksum/config) without including
another template file. Every key must be in the known set of tools/kvtier/curvine_config.py.
*/}}
{{- define "curvine.config.toml" -}}
{{- $masterData := include "curvine.masterDataDir" . -}}
# Rendered by the curvine chart for Curvine v{{ .Chart.AppVersion }}. Curvine ignores unknown keys,
# so every key here is checked against the known set (tools/kvtier/curvine_config.py).
cluster_id = {{ .Values.config.clusterId | quote }}
# Both flags default to true when omitted, and true wipes data at every start. With false, Curvine
# creates missing/empty meta, journal and data directories and reuses valid ones, so a fresh volume
# is initialised and an existing one is kept across upgrades and restarts.
format_master = false
format_worker = false

[log]
level = {{ .Values.config.logLevel | quote }}

[master]
# Each master pod overrides hostname with CURVINE_MASTER_HOSTNAME (its own stable DNS name).
hostname = {{ include "curvine.masterHost" (dict "root" . "index" 0) | quote }}
rpc_port = {{ int .Values.master.ports.rpc }}
web_port = {{ int .Values.master.ports.web }}
meta_dir = {{ printf "%s/meta" $masterData | quote }}
worker_policy = {{ .Values.config.workerPolicy | quote }}

[master.log]
level = {{ .Values.config.logLevel | quote }}

[journal]
enable = true
rpc_port = {{ int .Values.master.ports.journal }}
journal_dir = {{ printf "%s/journal" $masterData | quote }}
journal_addrs = [
{{- range $i := until (int .Values.master.replicas) }}
  { id = {{ add $i 1 }}, hostname = {{ include "curvine.masterHost" (dict "root" $ "index" $i) | quote }}, port = {{ int $.Values.master.ports.journal }} },
{{- end }}
]

[worker]
rpc_port = {{ int .Values.worker.ports.rpc }}
web_port = {{ int .Values.worker.ports.web }}
dir_reserved = {{ .Values.worker.dirReserved | quote }}
data_dir = [
{{- range .Values.worker.dataDirs }}
  {{ include "curvine.dataDirEntry" . | quote }},
{{- end }}
]

[worker.log]
level = {{ .Values.config.logLevel | quote }}

[client]
# Worker and CSI pods set CURVINE_CLIENT_HOSTNAME to the node name, for the `local` worker policy.
master_addrs = [
{{- range $i := until (int .Values.master.replicas) }}
  { hostname = {{ include "curvine.masterHost" (dict "root" $ "index" $i) | quote }}, port = {{ int $.Values.master.ports.rpc }} },
{{- end }}
]
block_size = {{ .Values.config.blockSize | quote }}
replicas = {{ int .Values.config.replicas }}
short_circuit = {{ .Values.config.shortCircuit }}
{{- with .Values.config.read }}
read_chunk_size = {{ .chunkSize | quote }}
read_chunk_num = {{ int .chunkNum }}
read_parallel = {{ int .parallel }}
read_slice_size = {{ .sliceSize | quote }}
{{- end }}
{{- with .Values.config.client }}
conn_timeout_ms = {{ int64 .connectTimeoutMs }}
rpc_timeout_ms = {{ int64 .rpcTimeoutMs }}
rpc_retry_max_duration_ms = {{ int64 .rpcRetryMaxDurationMs }}
data_timeout_ms = {{ int64 .dataTimeoutMs }}
{{- end }}
# Read by curvine-cli: the CSI controller creates each volume directory with mode 0777 & ~umask
# (csi.volumeAccess.mode); the FUSE clients apply each request's own umask instead.
umask = {{ include "curvine.volumeUmask" . }}

[fuse]
web_port = {{ int .Values.config.fuseWebPort }}
# The owner FUSE reports for a file Curvine recorded without one. curvine-fuse v0.4.1 records a created
# file's owner by the caller's user name in its own container, which knows no consumer's UID, so it
# stores none (a directory gets the numeric UID); without these every file reads as root's and the kernel
# refuses its creator any setattr, such as the L2 hit recorder's atime. The consumers' user, as volumeAccess.
uid = {{ int .Values.csi.volumeAccess.uid }}
gid = {{ int .Values.csi.volumeAccess.gid }}
{{- with .Values.config.fuse }}
entry_timeout_ms = {{ int64 .entryTimeoutMs }}
attr_timeout_ms = {{ int64 .attrTimeoutMs }}
negative_timeout_ms = {{ int64 .negativeTimeoutMs }}
enable_meta_cache = {{ .enableMetaCache }}
meta_cache_timeout = {{ .metaCacheTimeout | quote }}
max_readahead_kb = {{ int64 .maxReadaheadKb }}
{{- end }}

[fuse.log]
level = {{ .Values.config.logLevel | quote }}

[cli.log]
level = {{ .Values.config.logLevel | quote }}
# stderr, not the default stdout: callers read curvine-cli's stdout (`fs cat`, `report`), and a log line
# there would be mixed into the output.
log_dir = "stderr"
{{- end -}}

{{/* TOML octal umask of new volume directories: owner 0o022, group 0o002, world 0o000. */}}
{{- define "curvine.volumeUmask" -}}
{{- get (dict "owner" "0o022" "group" "0o002" "world" "0o000") .Values.csi.volumeAccess.mode -}}
{{- end -}}
