#!/usr/bin/env bash
# Installs AWS's SageMaker HyperPod SDK (PyPI `sagemaker-hyperpod`, with its own dependency pins) into a
# venv of its own, cached outside the repo ($KVTIER_CACHE, default ~/.cache/kvtier/hyperpod-sdk/<versions>)
# and linked as .venv-hyperpod (git-ignored). Its own venv because the SDK pins pytest, ruff, click and
# requests to versions the toolkit's .venv does not use; kvtier talks to it through a subprocess
# (tools/kvtier/upstream/hyperpod_sdk.py). Idempotent: a stamped venv is only linked.
#
#   toolchain/hyperpod-sdk.sh      install (or confirm) and link .venv-hyperpod
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck disable=SC1091
source "$root/toolchain/versions.env"
key="sagemaker-hyperpod-$HYPERPOD_SDK_VERSION-template-$HYPERPOD_CUSTOM_INFERENCE_TEMPLATE_VERSION"
venv="${KVTIER_CACHE:-$HOME/.cache/kvtier}/hyperpod-sdk/$key"
link="$root/.venv-hyperpod"
python=${PYTHON_HYPERPOD:-python3}
stamp="$venv/.installed-$key"

log() { printf '[hyperpod-sdk] %s\n' "$*" >&2; }

if [[ -f $stamp ]]; then
  ln -sfn "$venv" "$link"
  log "up to date: $link"
  exit 0
fi

start=$(date +%s)
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" --upgrade pip
"${pip[@]}" "sagemaker-hyperpod==$HYPERPOD_SDK_VERSION" \
  "hyperpod-custom-inference-template==$HYPERPOD_CUSTOM_INFERENCE_TEMPLATE_VERSION"
# Prove the models import as kvtier uses them before stamping.
"$venv/bin/python" -c "from sagemaker.hyperpod.inference.config.hp_endpoint_config import _HPEndpoint; import hyperpod_custom_inference_template.registry as r; print('sagemaker-hyperpod models ok; templates', sorted(r.SCHEMA_REGISTRY))" >&2
touch "$stamp"
ln -sfn "$venv" "$link"
# `times` into a file (a pipe would run it in a subshell with no children): the CPU the installs used.
times >"$venv/.install.times"
log "installed $venv in $(($(date +%s) - start)) s (CPU user/system: $(sed -n 2p "$venv/.install.times"); $(du -sh "$venv" | cut -f1)); linked as $link"
