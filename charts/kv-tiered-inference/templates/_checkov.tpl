{{/*
Policy-scanner exceptions (docs/security.md, "Policy scanners: checkov"): the checks an object fails by
design, as checkov's own skip annotations, `checkov.io/skipN: <check>=<reason>` on the object's metadata.
checkov splits the value at `=`, so a reason never holds one. Every reason lives here once (the image
reasons read as the curvine subchart's, so the docs list them once); templates name them by key.
Input: a list of keys; output: annotation lines (empty for an empty list).
*/}}
{{- define "kv-tiered-inference.checkovSkips" -}}
{{- $testPod := "a helm test pod runs once to completion" -}}
{{- $reasons := dict
  "pullPolicy" (list "CKV_K8S_15=images are pinned by exact version tags, so a node's cached copy is the pinned image; the pull policy stays a value")
  "digest" (list "CKV_K8S_43=images are pinned by exact version tags in values; pinning by digest is left to the operator's registry policy")
  "engineUser" (list "CKV_K8S_40=engines, the L2 jobs and the test pods share one UID (engine.podSecurityContext), the owner of the L2 files they all read and write")
  "testPod" (list (printf "CKV_K8S_8=%s: nothing long-lived to restart" $testPod) (printf "CKV_K8S_9=%s and serves no traffic" $testPod))
  "engineCpuLimit" (list "CKV_K8S_11=engines take no CPU limit on purpose: CFS throttling stalls token generation; the CPU request reserves the cores")
  "secretEnv" (list "CKV_K8S_35=vLLM reads the Hub token (HF_TOKEN) and the API key (VLLM_API_KEY, which the router and the test pods also send) from environment variables; both come from Secrets by secretKeyRef, never from values")
  "routerDiscovery" (list "CKV_K8S_38=Kubernetes discovery (router.discovery.mode kubernetes) watches the model's engine pods through the API server")
-}}
{{- $n := 0 -}}
{{- range $key := . -}}
{{- /* an unknown key renders no skip: the checkov gate (tests/charts/test_checkov_gate.py) reports it */ -}}
{{- range (get $reasons $key | default list) -}}
{{- $n = add1 $n }}
checkov.io/skip{{ $n }}: {{ . | quote }}
{{- end -}}
{{- end -}}
{{- end -}}
