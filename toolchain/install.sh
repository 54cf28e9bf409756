#!/usr/bin/env bash
# Installs the pinned toolchain into .tools/ (git-ignored).
# Go tools are built from the Go module proxy in throwaway wrapper modules, once per version,
# into a cache outside the repo ($KVTIER_CACHE, default ~/.cache/kvtier); .tools/bin links to them.
# Idempotent: a tool already built at its pinned version is not rebuilt.
#
#   toolchain/install.sh validate   helm3 helm4 (+ yamllint, yamale, LMCache's config loader,
#                                   vllm-router, Grafana's models): what `kvtier validate` runs
#   toolchain/install.sh            also helm-unittest ct registry helm-docs promtool
#   toolchain/install.sh cluster    also kube-apiserver, kube-controller-manager, kube-scheduler,
#                                   kubectl, etcd, kwok, kwokctl
#   toolchain/install.sh node       also the real node: kubelet, kube-proxy, coredns (Go module
#                                   proxy) and containerd, runc, CNI plugins (Debian packages)
#
# Independent groups of tools build side by side (a Go build leaves a core idle while it downloads,
# loads packages or links), and every build logs its own time, so a cold run shows where it goes.
# KVTIER_TOOLCHAIN_SERIAL=1 builds one group after another.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck disable=SC1091
source "$root/toolchain/versions.env"
cache=${KVTIER_CACHE:-$HOME/.cache/kvtier}
bin="$root/.tools/bin"
mkdir -p "$bin" "$cache/bin" "$cache/src" "$root/.tools/etc"
export GOFLAGS="-buildvcs=false -mod=mod"
export CGO_ENABLED=0

log() { printf '[toolchain] %s\n' "$*" >&2; }

# build "NAME ..." VERSION MODULE@VERSION "PACKAGE ..." LDFLAGS [REPLACE ...]
# Builds each PACKAGE (the NAME at the same position) from one wrapper module requiring MODULE@VERSION,
# in one `go build`: the packages they share are loaded and compiled once, and the links run side by
# side. Each REPLACE is "old=new@ver". A PACKAGE `local:DIR` is this repository's own main package,
# toolchain/DIR/main.go, built inside the wrapper module against MODULE (a smaller main of an upstream
# program: only the parts the tests use). BUILD_TAGS=... before the call sets Go build tags.
build() {
  local -a names pkgs
  read -ra names <<<"$1"
  read -ra pkgs <<<"$4"
  local version=$2 require=$3 ldflags=$5 tags=${BUILD_TAGS:-}
  shift 5
  local -a outs missing=()
  local i recipe own
  for i in "${!names[@]}"; do
    # The cache key holds the recipe too, so a changed flag or replace rebuilds (only the link step,
    # thanks to Go's build cache); for our own main, its source too.
    own=""
    if [[ ${pkgs[$i]} == local:* ]]; then own=$(sha256sum <"$root/toolchain/${pkgs[$i]#local:}/main.go"); fi
    recipe=$({
      printf '%s\n' "$require" "${pkgs[$i]}" "$ldflags" "$@"
      if [[ -n $tags$own ]]; then printf '%s\n' "tags $tags" "$own"; fi
    } | sha256sum | cut -c1-8)
    outs[i]="$cache/bin/${names[$i]}-$version-$recipe"
    [[ -x ${outs[$i]} ]] || missing+=("$i")
  done
  if ((${#missing[@]})); then
    local src="$cache/src/${names[0]}-$version" started=$SECONDS
    local -a build_pkgs=() imports=()
    log "building ${names[*]} $version (first time only; cached in $cache)"
    rm -rf "$src" && mkdir -p "$src/out"
    for i in "${missing[@]}"; do
      if [[ ${pkgs[$i]} == local:* ]]; then
        mkdir -p "$src/${names[$i]}"
        cp "$root/toolchain/${pkgs[$i]#local:}/main.go" "$src/${names[$i]}/"
        build_pkgs+=("./${names[$i]}")
      else
        build_pkgs+=("${pkgs[$i]}") imports+=("${pkgs[$i]}")
      fi
    done
    {
      echo "module kvtier.local/build/${names[0]}"
      echo "go 1.26"
      echo "require ${require%@*} ${require#*@}"
      for r in "$@"; do
        local old=${r%%=*} new=${r#*=}
        echo "replace $old => ${new%@*} ${new#*@}"
      done
    } >"$src/go.mod"
    if ((${#imports[@]})); then
      printf '//go:build tools\n\npackage tools\n\n' >"$src/tools.go"
      printf 'import _ "%s"\n' "${imports[@]}" >>"$src/tools.go"
    fi
    # `times` in the subshell gives the CPU its children used: unlike the wall time, it does not grow
    # when other work shares the cores, so cold runs on a busy machine stay comparable.
    if ! (
      cd "$src" && go build -trimpath -tags "$tags" -ldflags "-s -w $ldflags" -o out/ "${build_pkgs[@]}"
      status=$?
      times >cpu.times
      exit $status
    ) >"$src/build.log" 2>&1; then
      log "FAILED to build ${names[*]} $version; log: $src/build.log"
      tail -20 "$src/build.log" >&2
      return 1
    fi
    for i in "${missing[@]}"; do
      if [[ ${pkgs[$i]} == local:* ]]; then
        mv "$src/out/${names[$i]}" "${outs[$i]}"
      else
        mv "$src/out/$(go_binary_name "${pkgs[$i]}")" "${outs[$i]}"
      fi
    done
    log "built ${names[*]} $version in $((SECONDS - started)) s, $(cpu_seconds "$src/cpu.times") s of CPU"
  fi
  for i in "${!names[@]}"; do
    # A stable per-version name in the cache (what the cluster tooling reads) and the .tools/bin link.
    ln -sfn "${outs[$i]}" "$cache/bin/${names[$i]}-$version"
    ln -sf "${outs[$i]}" "$bin/${names[$i]}"
  done
}

# go_binary_name PACKAGE: the file `go build -o DIR/` writes, the last path element unless that is a
# major-version suffix (go.etcd.io/etcd/server/v3 -> server).
go_binary_name() {
  local base=${1##*/} rest=${1%/*}
  if [[ $base =~ ^v[0-9]+$ ]]; then base=${rest##*/}; fi
  printf '%s\n' "$base"
}

# cpu_seconds FILE: user + system seconds of the children line (the second) of bash's `times` output.
cpu_seconds() {
  sed -n 2p "$1" | tr -d 's' | awk '{split($1, u, "m"); split($2, y, "m"); printf "%d", u[1] * 60 + u[2] + y[1] * 60 + y[2]}'
}

# module_dir MODULE@VERSION: where the Go module cache holds that module's source.
module_dir() {
  go mod download -json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])'
}

install_helm3() {
  # Helm 3's own release build stamps the Kubernetes version its client-go belongs to; without it,
  # .Capabilities.KubeVersion (and `kubeVersion:` checks in charts) default to v1.20.
  local helm3_k8s_minor
  helm3_k8s_minor=$(sed -n 's#^\s*k8s.io/client-go v0\.\([0-9]*\)\..*#\1#p' \
    "$(module_dir "helm.sh/helm/v3@$HELM3_VERSION")/go.mod" | head -1)
  local helm3_stamp="-X helm.sh/helm/v3/internal/version.version=$HELM3_VERSION"
  for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    helm3_stamp+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$helm3_k8s_minor"
  done
  build helm3 "$HELM3_VERSION" "helm.sh/helm/v3@$HELM3_VERSION" helm.sh/helm/v3/cmd/helm "$helm3_stamp"
  # ct calls `helm`; the default helm for tools is Helm 3 (tests pick explicitly).
  ln -sf "$bin/helm3" "$bin/helm"
}

install_helm4() {
  build helm4 "$HELM4_VERSION" "helm.sh/helm/v4@$HELM4_VERSION" helm.sh/helm/v4/cmd/helm \
    "-X helm.sh/helm/v4/internal/version.version=$HELM4_VERSION"
}

install_chart_test_tools() {
  build helm-unittest "$HELM_UNITTEST_VERSION" \
    "github.com/helm-unittest/helm-unittest@$HELM_UNITTEST_VERSION" \
    github.com/helm-unittest/helm-unittest/cmd/helm-unittest \
    "-X github.com/helm-unittest/helm-unittest/internal/build.version=${HELM_UNITTEST_VERSION#v}" \
    "github.com/vmware-labs/yaml-jsonpath=$YAML_JSONPATH_REPLACEMENT"
  build ct "$CHART_TESTING_VERSION" "github.com/helm/chart-testing/v3@$CHART_TESTING_VERSION" \
    github.com/helm/chart-testing/v3/ct \
    "-X github.com/helm/chart-testing/v3/ct/cmd.Version=$CHART_TESTING_VERSION"
  # ct looks for its Chart.yaml schema and yamllint config next to its binary or in $CT_CONFIG_DIR.
  local ct_src
  ct_src=$(cd "$cache/src/ct-$CHART_TESTING_VERSION" && go list -m -f '{{.Dir}}' github.com/helm/chart-testing/v3)
  install -m 0644 "$ct_src/etc/chart_schema.yaml" "$ct_src/etc/lintconf.yaml" "$root/.tools/etc/"
}

install_python_tools() {
  # Python tools go into the toolkit's venv ($PYTHON): ct's yamllint and yamale; LMCache (config
  # loader only: --no-deps keeps torch out) to check rendered LMCache configs; vllm-router to check
  # and start the router with the flags the chart renders; Grafana's dashboard models.
  local python=${PYTHON:-python3}
  local want="grafana-foundation-sdk==$GRAFANA_FOUNDATION_SDK_VERSION lmcache==$LMCACHE_VERSION "
  want+="vllm-router==$VLLM_ROUTER_VERSION yamale==$YAMALE_VERSION yamllint==$YAMLLINT_VERSION "
  local have
  have=$("$python" -m pip list --format=freeze 2>/dev/null |
    grep -Ei '^(grafana[-_]foundation[-_]sdk|lmcache|vllm-router|vllm_router|yamllint|yamale)==' |
    tr '_' '-' | tr 'A-Z' 'a-z' | sort | tr '\n' ' ' || true)
  if [[ $have != "$want" ]]; then
    log "installing $want"
    "$python" -m pip install --quiet "yamllint==$YAMLLINT_VERSION" "yamale==$YAMALE_VERSION" \
      "vllm-router==$VLLM_ROUTER_VERSION" "grafana-foundation-sdk==$GRAFANA_FOUNDATION_SDK_VERSION"
    "$python" -m pip install --quiet --no-deps "lmcache==$LMCACHE_VERSION"
  fi
}

install_publish_tools() {
  # `registry` serves OCI on loopback for the package round-trip test; helm-docs writes README tables.
  # The registry's own main links every cloud storage driver (S3, Azure, GCS: most of its build time);
  # ours (toolchain/registry) links the filesystem driver and htpasswd auth, all the tests use.
  build registry "$DISTRIBUTION_VERSION" "github.com/distribution/distribution/v3@$DISTRIBUTION_VERSION" \
    local:registry \
    "-X github.com/distribution/distribution/v3/version.version=$DISTRIBUTION_VERSION"
  build helm-docs "$HELM_DOCS_VERSION" "github.com/norwoodj/helm-docs@$HELM_DOCS_VERSION" \
    github.com/norwoodj/helm-docs/cmd/helm-docs "-X main.version=${HELM_DOCS_VERSION#v}"
}

install_monitoring_tools() {
  # promtool checks the rendered PrometheusRule, runs its rule unit tests and parses dashboard queries.
  # Module v0.316.0 is Prometheus 3.16.0: the first digit of the module minor is the major.
  local minor=${PROMETHEUS_VERSION#v0.} release
  minor=${minor%%.*}
  release="${minor:0:1}.$((10#${minor:1})).${PROMETHEUS_VERSION##*.}"
  # remove_all_sd is Prometheus' own build tag (plugins/) that leaves out the cloud service discoveries;
  # promtool keeps its rule checks, rule unit tests and query parser, which is all the tests use.
  BUILD_TAGS=remove_all_sd build promtool "$PROMETHEUS_VERSION" "github.com/prometheus/prometheus@$PROMETHEUS_VERSION" \
    github.com/prometheus/prometheus/cmd/promtool "-X github.com/prometheus/common/version.Version=$release"
}

install_etcd_kwok() {
  build etcd "$ETCD_VERSION" "go.etcd.io/etcd/server/v3@$ETCD_VERSION" go.etcd.io/etcd/server/v3 \
    "-X go.etcd.io/etcd/api/v3/version.Version=${ETCD_VERSION#v}"
  local kwok_stamp="-X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}"
  build "kwok kwokctl" "$KWOK_VERSION" "sigs.k8s.io/kwok@$KWOK_VERSION" \
    "sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl" "$kwok_stamp"
}

install_kubernetes() {
  # k8s.io/kubernetes points its staging modules at ./staging (absent from the module zip); a dependent
  # module must map each one to its own release, v0.<minor>.<patch> for Kubernetes v1.<minor>.<patch>.
  local staging_version="v0.${KUBERNETES_VERSION#v1.}" minor mod_dir replaces=()
  minor=${staging_version#v0.} && minor=${minor%%.*}
  mod_dir=$(module_dir "k8s.io/kubernetes@$KUBERNETES_VERSION")
  while read -r m; do replaces+=("$m=$m@$staging_version"); done < <(
    sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$mod_dir/go.mod")
  if ((${#replaces[@]} == 0)); then
    log "no staging replaces found in $mod_dir/go.mod; cannot build Kubernetes $KUBERNETES_VERSION"
    return 1
  fi
  # Without stamping, the binaries report v0.0.0-master and kubectl/Helm see a bogus server version.
  local stamp="" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    stamp+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    stamp+=" -X $pkg.gitTreeState=clean"
  done
  local commands=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
  # The real node's kubelet and kube-proxy come from the same module with the same recipe.
  if [[ $mode == node ]]; then commands+=(kubelet kube-proxy); fi
  build "${commands[*]}" "$KUBERNETES_VERSION" "k8s.io/kubernetes@$KUBERNETES_VERSION" \
    "${commands[*]/#/k8s.io/kubernetes/cmd/}" "$stamp" "${replaces[@]}"
}

install_pause() {
  # The pods' sandbox program is this repository's own (toolchain/node/pause), cached by its source hash.
  local pause_dir="$root/toolchain/node/pause" pause_hash
  pause_hash=$(cat "$pause_dir/go.mod" "$pause_dir/main.go" | sha256sum | cut -c1-8)
  if [[ ! -x $cache/bin/pause-$pause_hash ]]; then
    log "building pause ($pause_hash)"
    (cd "$pause_dir" && go build -trimpath -ldflags "-s -w" -o "$cache/bin/pause-$pause_hash.tmp" .)
    mv "$cache/bin/pause-$pause_hash.tmp" "$cache/bin/pause-$pause_hash"
  fi
}

install_coredns() {
  # Our main (toolchain/coredns) links only the plugins the tier's Corefile names.
  build coredns "$COREDNS_VERSION" "github.com/coredns/coredns@$COREDNS_VERSION" local:coredns \
    "-X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION"
}

install_debs() {
  # containerd, runc, the CNI plugins and the image tools come as Debian packages: downloaded with apt
  # (no system install) and unpacked into the cache; toolchain/debs.sh knows the list.
  bash "$root/toolchain/debs.sh" "$cache"
}

# group NAME FUNCTION ...: runs the functions one after another, in the background unless
# KVTIER_TOOLCHAIN_SERIAL=1, and logs the group's time.
pids=() groups=()
run_group() {
  local name=$1 started=$SECONDS f
  shift
  for f in "$@"; do "$f"; done
  log "$name ready in $((SECONDS - started)) s"
}
group() {
  if [[ ${KVTIER_TOOLCHAIN_SERIAL:-} == 1 ]]; then
    run_group "$@"
  else
    run_group "$@" &
    pids+=("$!") groups+=("$1")
  fi
}

mode=${1:-tools}
case $mode in
  validate | tools | cluster | node) ;;
  *) log "unknown set '$mode'; use one of: validate, tools, cluster, node"; exit 2 ;;
esac
command -v go >/dev/null || { log "Go is required (https://go.dev); none found on PATH"; exit 2; }
started=$SECONDS
# Each `go build` below first compiles the standard library's packages it imports into Go's build cache,
# and builds started together do not wait for one another there: each compiles them again (measured
# 2026-12-06: three builds of one small program at once from an empty cache took 220 s of CPU, 111 s with
# the library built first; the set-up starts about nine). So the library goes first, once: about 90 s of
# CPU cold, a second with the cache warm.
std_started=$SECONDS
(cd "$cache" && go build -trimpath std && times >"$cache/std.times") || { log "FAILED: go build std"; exit 1; }
log "standard library ready in $((SECONDS - std_started)) s, $(cpu_seconds "$cache/std.times") s of CPU"
# The largest build first: it is the critical path of a cold run.
case $mode in
  cluster)
    group "kubernetes" install_kubernetes
    group "etcd and kwok" install_etcd_kwok
    ;;
  node)
    group "kubernetes" install_kubernetes
    group "etcd, kwok and node" install_etcd_kwok install_pause install_coredns
    ;;
esac
group "helm 3" install_helm3
group "helm 4" install_helm4
group "python tools" install_python_tools
if [[ $mode == node ]]; then group "node packages" install_debs; fi
if [[ $mode != validate ]]; then
  group "chart test tools" install_chart_test_tools
  group "publish tools" install_publish_tools
  group "promtool" install_monitoring_tools
fi
failed=()
for i in "${!pids[@]}"; do wait "${pids[$i]}" || failed+=("${groups[$i]}"); done
if ((${#failed[@]})); then
  log "FAILED: ${failed[*]} (each failure is logged above)"
  exit 1
fi
log "ready in $((SECONDS - started)) s: $(ls "$bin" | tr '\n' ' ')"
