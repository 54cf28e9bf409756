#!/usr/bin/env bash
# Installs a PyPI tool that pins its own dependencies into a venv of its own, cached outside the repo
# ($KVTIER_CACHE, default ~/.cache/kvtier/<name>/<versions>) and linked as .venv-<link> (git-ignored). kvtier
# talks to each through a subprocess. Idempotent: a stamped venv is only linked.
#
#   toolchain/side-venv.sh hyperpod-sdk   AWS's SageMaker HyperPod SDK (pins pytest, ruff, click, requests)
#                                         -> .venv-hyperpod
#   toolchain/side-venv.sh netpol         IBM np-guard's network-config-analyzer (pins PyYAML, networkx)
#                                         -> .venv-netpol: computes what the charts' NetworkPolicies allow
#   toolchain/side-venv.sh checkov        Bridgecrew's checkov policy scanner (pins its own dependency tree)
#                                         -> .venv-checkov: the scan chart registries run on renders
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck disable=SC1091
source "$root/toolchain/versions.env"

name=${1:?usage: toolchain/side-venv.sh hyperpod-sdk|netpol|checkov}
case $name in
  hyperpod-sdk)
    key="sagemaker-hyperpod-$HYPERPOD_SDK_VERSION-template-$HYPERPOD_CUSTOM_INFERENCE_TEMPLATE_VERSION"
    link=.venv-hyperpod
    packages=("sagemaker-hyperpod==$HYPERPOD_SDK_VERSION"
      "hyperpod-custom-inference-template==$HYPERPOD_CUSTOM_INFERENCE_TEMPLATE_VERSION")
    # Proves the models import as kvtier uses them.
    probe="from sagemaker.hyperpod.inference.config.hp_endpoint_config import _HPEndpoint; import hyperpod_custom_inference_template.registry as r; print('sagemaker-hyperpod models ok; templates', sorted(r.SCHEMA_REGISTRY))"
    ;;
  netpol)
    key="network-config-analyzer-$NETWORK_CONFIG_ANALYZER_VERSION"
    link=.venv-netpol
    packages=("network-config-analyzer==$NETWORK_CONFIG_ANALYZER_VERSION")
    probe="import nca.nca_cli; print('network-config-analyzer ok')"
    ;;
  checkov)
    key="checkov-$CHECKOV_VERSION"
    link=.venv-checkov
    packages=("checkov==$CHECKOV_VERSION")
    probe="import checkov.version as v; print('checkov', v.version)"
    ;;
  *) echo "side-venv.sh: unknown venv '$name' (expected hyperpod-sdk, netpol or checkov)" >&2; exit 2 ;;
esac

venv="${KVTIER_CACHE:-$HOME/.cache/kvtier}/$name/$key"
python=${PYTHON_SIDE_VENV:-${PYTHON_HYPERPOD:-python3}}
stamp="$venv/.installed-$key"
log() { printf '[%s] %s\n' "$name" "$*" >&2; }

if [[ -f $stamp ]]; then
  ln -sfn "$venv" "$root/$link"
  log "up to date: $link"
  exit 0
fi

start=$(date +%s)
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" --upgrade pip
"${pip[@]}" "${packages[@]}"
"$venv/bin/python" -c "$probe" >&2
touch "$stamp"
ln -sfn "$venv" "$root/$link"
# `times` into a file (a pipe would run it in a subshell with no children): the CPU the installs used.
times >"$venv/.install.times"
log "installed $venv in $(($(date +%s) - start)) s (CPU user/system: $(sed -n 2p "$venv/.install.times"); $(du -sh "$venv" | cut -f1)); linked as $link"
