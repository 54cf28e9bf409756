{{/*
Policy-scanner exceptions (docs/security.md, "Policy scanners: checkov"): the checks an object fails by
design, as checkov's own skip annotations, `checkov.io/skipN: <check>=<reason>` on the object's metadata.
checkov splits the value at `=`, so a reason never holds one. Every reason lives here once; templates name
them by key. Input: a list of keys; output: annotation lines (empty for an empty list).
*/}}
{{- define "curvine.checkovSkips" -}}
{{- $privileged := "the node plugin runs the FUSE clients and propagates their mounts to the kubelet (Bidirectional mount propagation), which needs a privileged container" -}}
{{- $testPod := "a helm test pod runs once to completion" -}}
{{- $reasons := dict
  "pullPolicy" (list "CKV_K8S_15=images are pinned by exact version tags, so a node's cached copy is the pinned image; the pull policy stays a value")
  "digest" (list "CKV_K8S_43=images are pinned by exact version tags in values; pinning by digest is left to the operator's registry policy")
  "imageUser" (list "CKV_K8S_40=the containers run as their images' own users, which own the images' files and the data directories")
  "testPod" (list (printf "CKV_K8S_8=%s: nothing long-lived to restart" $testPod) (printf "CKV_K8S_9=%s and serves no traffic" $testPod))
  "testWorkersToken" (list "CKV_K8S_38=the test reads how many workers the DaemonSet scheduled from the API server (its own Role)")
  "csiProbes" (list "CKV_K8S_8=the CSI plugin is probed through the liveness-probe sidecar, which (like the other sidecars) has no health endpoint of its own" "CKV_K8S_9=CSI plugins serve the kubelet and the provisioner over a Unix socket, not Service traffic, so readiness gates nothing")
  "csiControllerToken" (list "CKV_K8S_38=the external-provisioner creates and deletes PersistentVolumes through the API server")
  "csiNodeToken" (list "CKV_K8S_38=curvine-csi v0.4.1's node plugin exits at start without an API client (pkg/csi/node.go newNodeService), which it uses for its mount-state Secret only with csi.node.mountStateSecret")
  "csiNodeSecrets" (list "CKV2_K8S_5=the node plugin keeps one mount-state Secret per node, named after the node, so resourceNames cannot list them; the Role covers the release namespace only")
  "csiNodePrivileged" (list (printf "CKV_K8S_16=%s" $privileged) (printf "CKV_K8S_20=%s" $privileged) (printf "CKV_K8S_28=%s" $privileged) (printf "CKV_K8S_37=%s" $privileged) "CKV_K8S_22=a privileged container can remount its root file system, so read-only would be no boundary; the CSI sidecars have one" "CKV_K8S_23=the FUSE clients need root to mount and to open /dev/fuse")
  "csiNodeTemplate" (list "CKV_K8S_29=a change to the node plugin's pod template restarts it on upgrade, which cuts every FUSE volume mounted on the node; the privileged plugin container ignores seccomp anyway" "CKV_K8S_31=a change to the node plugin's pod template restarts it on upgrade, which cuts every FUSE volume mounted on the node; the privileged plugin container ignores seccomp anyway")
  "workerRoot" (list "CKV_K8S_23=workers run as root (worker.podSecurityContext) to write the nodes' hostPath data directories")
  "workerHostNetwork" (list "CKV_K8S_19=host-network workers (worker.hostNetwork) are reached at their node's address, which is how Curvine matches a node's FUSE clients to its local worker")
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
