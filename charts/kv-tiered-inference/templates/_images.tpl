{{/* Image references and pull secrets of every pod. */}}

{{/*
One image reference: global.imageRegistry > image.registry; digest beats tag.
Input: dict "image" <image values> "key" <its values key, for the refusal> "root" $.
*/}}
{{- define "kv-tiered-inference.image" -}}
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
{{- printf "%s:%s" $repo (required (printf "[image-reference] %s.tag: image %s needs a tag or a digest (the chart never defaults to latest)" .key .image.repository) .image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The test pods' image values: tests.image, or the engine image when its repository is empty. */}}
{{- define "kv-tiered-inference.testImage" -}}
{{- if .Values.tests.image.repository -}}
{{- include "kv-tiered-inference.image" (dict "image" .Values.tests.image "key" "tests.image" "root" .) -}}
{{- else -}}
{{- include "kv-tiered-inference.image" (dict "image" .Values.engine.image "key" "engine.image" "root" .) -}}
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
