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
HIDDEN = "_kvtier_"  # prefix that turns a template into a partial in a batch copy

DEFINES = r"""{{- define "kvtier.tables" -}}
{{- /* Helm's coalesceTablesFullKey: fills .dst (mutated in place) from .src */ -}}
{{- $dst := .dst -}}{{- $merge := .merge -}}
{{- range $k, $sv := .src -}}
  {{- if hasKey $dst $k -}}
    {{- $dv := index $dst $k -}}
    {{- if and (kindIs "invalid" $dv) (not $merge) (not (kindIs "invalid" $sv)) -}}{{- $_ := unset $dst $k -}}
    {{- else if and (kindIs "map" $sv) (kindIs "map" $dv) -}}
      {{- include "kvtier.tables" (dict "dst" $dv "src" $sv "merge" $merge) -}}
    {{- end -}}
  {{- else -}}{{- $_ := set $dst $k $sv -}}{{- end -}}
{{- end -}}
{{- end -}}

{{- define "kvtier.globals" -}}
{{- /* Helm's coalesceGlobals: the parent's globals win over the subchart's own */ -}}
{{- $dst := .dst -}}{{- $src := .src -}}
{{- $dg := dict -}}{{- $sg := dict -}}{{- $ok := true -}}
{{- if hasKey $dst "global" -}}{{- if kindIs "map" $dst.global -}}{{- $dg = $dst.global -}}{{- else -}}{{- $ok = false -}}{{- end -}}{{- end -}}
{{- if hasKey $src "global" -}}{{- if kindIs "map" $src.global -}}{{- $sg = $src.global -}}{{- else -}}{{- $ok = false -}}{{- end -}}{{- end -}}
{{- if $ok -}}
{{- range $k, $v := $sg -}}
  {{- if kindIs "map" $v -}}
    {{- $vv := deepCopy $v -}}
    {{- if not (hasKey $dg $k) -}}{{- $_ := set $dg $k $vv -}}
    {{- else if kindIs "map" (index $dg $k) -}}
      {{- include "kvtier.tables" (dict "dst" $vv "src" (index $dg $k) "merge" true) -}}{{- $_ := set $dg $k $vv -}}
    {{- end -}}
  {{- else if and (hasKey $dg $k) (kindIs "map" (index $dg $k)) -}}
  {{- else -}}{{- $_ := set $dg $k $v -}}{{- end -}}
{{- end -}}
{{- $_ := set $dst "global" $dg -}}
{{- end -}}
{{- end -}}

{{- define "kvtier.chartvals" -}}
{{- /* Helm's coalesce for one chart and its enabled dependencies; .v is mutated in place */ -}}
{{- $v := .v -}}{{- $chart := .chart -}}{{- $deps := .deps -}}
{{- $defaults := $chart.defaults | fromYaml -}}
{{- $subnames := list -}}{{- range $deps -}}{{- $subnames = append $subnames .name -}}{{- end -}}
{{- range $k, $dv := $defaults -}}
  {{- if hasKey $v $k -}}
    {{- $uv := index $v $k -}}
    {{- if kindIs "invalid" $uv -}}{{- $_ := unset $v $k -}}
    {{- else if and (kindIs "map" $uv) (kindIs "map" $dv) -}}
      {{- include "kvtier.tables" (dict "dst" $uv "src" $dv "merge" (has $k $subnames)) -}}
    {{- end -}}
  {{- else -}}{{- $_ := set $v $k $dv -}}{{- end -}}
{{- end -}}
{{- range $deps -}}
  {{- if not (hasKey $v .name) -}}{{- $_ := set $v .name dict -}}{{- end -}}
  {{- $sub := index $v .name -}}
  {{- include "kvtier.globals" (dict "dst" $sub "src" $v) -}}
  {{- include "kvtier.chartvals" (dict "v" $sub "chart" .chart "deps" .chart.deps) -}}
{{- end -}}
{{- end -}}

{{- define "kvtier.enabled" -}}
{{- /* the dependencies Helm keeps: conditions and tags read from the fully coalesced values */ -}}
{{- $all := deepCopy .user -}}
{{- include "kvtier.chartvals" (dict "v" $all "chart" .chart "deps" .chart.deps) -}}
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
"""

PROBE = r"""{{- $base := $.Template.BasePath -}}
{{- $rel := dict %(release)s "Service" $.Release.Service -}}
{{- $batch := $.Values.global.__kvtier_batch -}}
{{- /* members of a batch agree on what enables subcharts, so the first member decides for all */ -}}
{{- $deps := (include "kvtier.enabled" (dict "user" (index $batch.members 0) "chart" $batch.chart) | fromJson).deps -}}
%(key)s:
{{- range $i, $user := $batch.members }}
{{- $sel := index $batch.select $i }}
{{- $vals := deepCopy $user }}
{{- include "kvtier.chartvals" (dict "v" $vals "chart" $batch.chart "deps" $deps) }}
{{- range $name := list %(path)s }}{{ $vals = index $vals $name }}{{ end }}
  "{{ $i }}":
    __values: {{ toJson $vals | b64enc | quote }}
{{- range $pair := list %(pairs)s }}
{{- $path := printf "%%s/%%s" $base (index $pair 0) }}
{{- if has $path $sel }}
{{- $ctx := dict "Values" $vals "Chart" %(chart)s "Capabilities" $.Capabilities "Files" $.Files }}
{{- $_ := set $ctx "Subcharts" $.Subcharts }}
{{- $_ := set $ctx "Release" $rel }}
{{- $_ := set $ctx "Template" (dict "Name" $path "BasePath" $base) }}
    {{ $path | quote }}: {{ include (printf "%%s/%%s" $base (index $pair 1)) $ctx | b64enc | quote }}
{{- end }}
{{- end }}
{{- end }}
"""
