{{/* The `helm test` pods' common parts: hook metadata, pod spec and the test container's basics. */}}

{{/*
Common spec of a helm test pod: test hook, kvcheck.py from the podscripts ConfigMap, and the node
selection of the model's engines so the engine image (the default test image) is already pulled.
Input: dict "root" $ "model" <models[] entry or nil> "name" <pod name> "weight" <hook weight>, and
"apiKeyEnv" true for pods that get VLLM_API_KEY (auth.apiKeySecret; its checkov skip). A Pod's
name may have 253 characters (the kubelet cuts its hostname to 63), so test pod names are never cut.
*/}}
{{- define "kv-tiered-inference.testPodMeta" -}}
apiVersion: v1
kind: Pod
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "kv-tiered-inference.labels" .root | nindent 4 }}
    app.kubernetes.io/component: test
  annotations:
    helm.sh/hook: test
    helm.sh/hook-weight: {{ .weight | quote }}
    helm.sh/hook-delete-policy: {{ ternary "before-hook-creation,hook-succeeded" "before-hook-creation" .root.Values.tests.deleteSucceededPods }}
    {{- $skips := list "pullPolicy" "digest" "engineUser" "testPod" }}
    {{- if and .apiKeyEnv .root.Values.auth.apiKeySecret.name }}
    {{- $skips = append $skips "secretEnv" }}
    {{- end }}
    {{- include "kv-tiered-inference.checkovSkips" $skips | nindent 4 }}
{{- end -}}

{{- define "kv-tiered-inference.testPodSpec" -}}
restartPolicy: Never
automountServiceAccountToken: false
enableServiceLinks: false
{{- include "kv-tiered-inference.imagePullSecrets" .root }}
securityContext:
  {{- toYaml .root.Values.engine.podSecurityContext | nindent 2 }}
{{- with .model }}
{{- with (include "kv-tiered-inference.engineNodeSelector" $ | fromJson) }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (include "kv-tiered-inference.engineTolerations" $ | fromJsonArray) }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The test container's fixed parts (image, resources, security, podscripts mount). Input: root. */}}
{{- define "kv-tiered-inference.testContainerCommon" -}}
image: {{ include "kv-tiered-inference.testImage" . }}
imagePullPolicy: {{ .Values.tests.image.pullPolicy | default .Values.engine.image.pullPolicy }}
resources:
  {{- toYaml .Values.tests.resources | nindent 2 }}
securityContext:
  {{- toYaml .Values.engine.securityContext | nindent 2 }}
{{- end -}}
