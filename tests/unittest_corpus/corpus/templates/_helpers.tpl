{{- define "corpus.name" -}}{{ .Release.Name }}-corpus{{- end }}
{{- define "corpus.checked" -}}{{ if .Values.helperFail }}{{ fail "helper refused" }}{{ end }}{{- end }}
