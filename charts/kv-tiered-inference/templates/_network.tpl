{{/* Pieces of the NetworkPolicies (networkpolicy.yaml). */}}

{{/* Selector labels of the helm test pods (they carry the release's labels and component "test"). */}}
{{- define "kv-tiered-inference.testSelectorLabels" -}}
{{ include "kv-tiered-inference.selectorLabels" . }}
app.kubernetes.io/component: test
{{- end -}}

{{/* The L2 warm-up Job's pods (l2-warmup-job.yaml). Input: root. */}}
{{- define "kv-tiered-inference.warmupSelectorLabels" -}}
{{ include "kv-tiered-inference.selectorLabels" . }}
app.kubernetes.io/component: l2-warmup
{{- end -}}

{{/*
DNS to any address on port 53: cluster DNS may be a Service in kube-system or a node-local cache on a
link-local address, which no pod selector matches.
*/}}
{{- define "kv-tiered-inference.dnsEgress" -}}
ports:
  - port: 53
    protocol: UDP
  - port: 53
    protocol: TCP
{{- end -}}

{{/* Egress rule to the Kubernetes API server (networkPolicy.apiServer). */}}
{{- define "kv-tiered-inference.apiServerEgress" -}}
{{- $api := .Values.networkPolicy.apiServer -}}
- ports:
    {{- range $api.ports }}
    - port: {{ . }}
      protocol: TCP
    {{- end }}
  {{- with $api.to }}
  to:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}

{{/* "true" when the routers watch the engine pods through the API server (kubernetes discovery). */}}
{{- define "kv-tiered-inference.routerWatchesPods" -}}
{{- and (eq .Values.router.discovery.mode "kubernetes") (not (include "kv-tiered-inference.kvStatic" .)) -}}
{{- end -}}
