# ruff: noqa: E501 - template text, one action per line reads best
"""Template text for batch renders: many tests' values rendered in one `helm template` run.

Each test's user values reach Helm inside `global.__kvtier_batch.members` (so Helm parses them as it
parses any values file), and the named templates below coalesce them with each chart's own
values.yaml text the way Helm's CoalesceValues does (user wins, tables merge, a user null deletes a
default, a subchart gets its parent's globals and its values under its name, disabled subcharts are
dropped after their condition is read). The batch is only trusted after a self-check against an
ordinary render of one member (see batch.py).
"""

from __future__ import annotations

PARTIAL = "_kvtier-batch.tpl"

DEFINES = r"""{{- define "kvtier.tables" -}}
{{- $dst := deepCopy .dst -}}{{- $merge := .merge -}}
{{- range $k, $sv := .src -}}
  {{- if hasKey $dst $k -}}
    {{- $dv := index $dst $k -}}
    {{- if and (kindIs "invalid" $dv) (not $merge) (not (kindIs "invalid" $sv)) -}}{{- $_ := unset $dst $k -}}
    {{- else if and (kindIs "map" $sv) (kindIs "map" $dv) -}}
      {{- $_ := set $dst $k (include "kvtier.tables" (dict "dst" $dv "src" $sv "merge" $merge) | fromJson) -}}
    {{- end -}}
  {{- else -}}{{- $_ := set $dst $k $sv -}}{{- end -}}
{{- end -}}
{{- toJson $dst -}}
{{- end -}}

{{- define "kvtier.globals" -}}
{{- $dg := dict -}}{{- $sg := dict -}}{{- $ok := true -}}
{{- if hasKey .dst "global" -}}{{- if kindIs "map" .dst.global -}}{{- $dg = deepCopy .dst.global -}}{{- else -}}{{- $ok = false -}}{{- end -}}{{- end -}}
{{- if hasKey .src "global" -}}{{- if kindIs "map" .src.global -}}{{- $sg = .src.global -}}{{- else -}}{{- $ok = false -}}{{- end -}}{{- end -}}
{{- if $ok -}}
{{- range $k, $v := $sg -}}
  {{- if kindIs "map" $v -}}
    {{- if not (hasKey $dg $k) -}}{{- $_ := set $dg $k $v -}}
    {{- else if kindIs "map" (index $dg $k) -}}
      {{- $_ := set $dg $k (include "kvtier.tables" (dict "dst" $v "src" (index $dg $k) "merge" true) | fromJson) -}}
    {{- end -}}
  {{- else if and (hasKey $dg $k) (kindIs "map" (index $dg $k)) -}}
  {{- else -}}{{- $_ := set $dg $k $v -}}{{- end -}}
{{- end -}}
{{- toJson (dict "ok" true "global" $dg) -}}
{{- else -}}{{- toJson (dict "ok" false) -}}{{- end -}}
{{- end -}}

{{- define "kvtier.chartvals" -}}
{{- $v := deepCopy .user -}}{{- $chart := .chart -}}{{- $deps := .deps -}}
{{- $defaults := $chart.defaults | fromYaml -}}
{{- $subnames := list -}}{{- range $deps -}}{{- $subnames = append $subnames .name -}}{{- end -}}
{{- range $k, $dv := $defaults -}}
  {{- if hasKey $v $k -}}
    {{- $uv := index $v $k -}}
    {{- if kindIs "invalid" $uv -}}{{- $_ := unset $v $k -}}
    {{- else if and (kindIs "map" $uv) (kindIs "map" $dv) -}}
      {{- $_ := set $v $k (include "kvtier.tables" (dict "dst" $uv "src" $dv "merge" (has $k $subnames)) | fromJson) -}}
    {{- end -}}
  {{- else -}}{{- $_ := set $v $k $dv -}}{{- end -}}
{{- end -}}
{{- range $deps -}}
  {{- $sub := dict -}}
  {{- if hasKey $v .name -}}{{- $sub = index $v .name -}}{{- end -}}
  {{- $g := include "kvtier.globals" (dict "dst" $sub "src" $v) | fromJson -}}
  {{- if $g.ok -}}{{- $_ := set $sub "global" $g.global -}}{{- end -}}
  {{- $_ := set $v .name (include "kvtier.chartvals" (dict "user" $sub "chart" .chart "deps" .chart.deps) | fromJson) -}}
{{- end -}}
{{- toJson $v -}}
{{- end -}}

{{- define "kvtier.enabled" -}}
{{- /* the dependencies Helm keeps: conditions and tags read from the fully coalesced values */ -}}
{{- $all := include "kvtier.chartvals" (dict "user" .user "chart" .chart "deps" .chart.deps) | fromJson -}}
{{- $keep := list -}}
{{- range .chart.deps -}}
  {{- $on := true -}}
  {{- if .tags -}}
    {{- $hasTrue := false -}}{{- $hasFalse := false -}}
    {{- if kindIs "map" $all.tags -}}{{- range $t := .tags -}}
      {{- if hasKey $all.tags $t -}}{{- $tv := index $all.tags $t -}}
        {{- if kindIs "bool" $tv -}}{{- if $tv -}}{{- $hasTrue = true -}}{{- else -}}{{- $hasFalse = true -}}{{- end -}}{{- end -}}
      {{- end -}}
    {{- end -}}{{- end -}}
    {{- if and (not $hasTrue) $hasFalse -}}{{- $on = false -}}{{- end -}}
  {{- end -}}
  {{- range $c := splitList "," (trim (.condition | default "")) -}}
    {{- if $c -}}
      {{- $node := $all -}}{{- $found := true -}}
      {{- range $part := splitList "." $c -}}
        {{- if and $found (kindIs "map" $node) (hasKey $node $part) -}}{{- $node = index $node $part -}}
        {{- else -}}{{- $found = false -}}{{- end -}}
      {{- end -}}
      {{- if and $found (kindIs "bool" $node) -}}{{- $on = $node -}}{{- break -}}{{- end -}}
    {{- end -}}
  {{- end -}}
  {{- if $on -}}{{- $keep = append $keep . -}}{{- end -}}
{{- end -}}
{{- toJson (dict "deps" $keep) -}}{{- /* fromJson only returns objects */ -}}
{{- end -}}

{{- define "kvtier.member" -}}
{{- $batch := .batch -}}
{{- $user := index $batch.members .idx -}}
{{- $deps := (include "kvtier.enabled" (dict "user" $user "chart" $batch.chart) | fromJson).deps -}}
{{- $vals := include "kvtier.chartvals" (dict "user" $user "chart" $batch.chart "deps" $deps) | fromJson -}}
{{- range $name := .path -}}{{- $vals = index $vals $name -}}{{- end -}}
{{- toJson $vals -}}
{{- end -}}
"""

PROBE = r"""{{- $base := $.Template.BasePath -}}
{{- $rel := dict %(release)s "Service" $.Release.Service -}}
{{- $batch := $.Values.global.__kvtier_batch -}}
%(key)s:
{{- range $i, $_ := $batch.members }}
{{- $vals := include "kvtier.member" (dict "batch" $batch "idx" $i "path" (list %(path)s)) | fromJson }}
  "{{ $i }}":
    __values: {{ toJson $vals | b64enc | quote }}
{{- range $name := list %(names)s }}
{{- $path := printf "%%s/%%s" $base $name }}
{{- $ctx := dict "Values" $vals "Chart" $.Chart "Capabilities" $.Capabilities "Files" $.Files }}
{{- $_ := set $ctx "Subcharts" $.Subcharts }}
{{- $_ := set $ctx "Release" $rel }}
{{- $_ := set $ctx "Template" (dict "Name" $path "BasePath" $base) }}
    {{ $path | quote }}: {{ include $path $ctx | b64enc | quote }}
{{- end }}
{{- end }}
"""
