"""Stand-in for LMCache's CUDA KV-copy kernels under vLLM's CPU backend (see README.md).

`register` is the vLLM general-plugin entry point: it only arms an import hook, so loading vLLM with
the plugin installed costs nothing and imports nothing of LMCache's.
"""

from __future__ import annotations

import os


def register() -> None:
    if os.environ.get("LMCACHE_CPU_COPY_DISABLE") == "1":
        return
    from lmcache_cpu_copy import hook

    hook.install()
