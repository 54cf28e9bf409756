"""Stand-in for the CUDA block copy of vLLM's native KV offloading on vLLM's CPU backend (see README.md).

`register` is the vLLM general-plugin entry point. It does nothing unless vLLM runs on its CPU platform;
there it lets the offloading spec hand out this package's worker instead of refusing the device.
"""

from __future__ import annotations

import os


def register() -> None:
    if os.environ.get("OFFLOAD_CPU_COPY_DISABLE") == "1":
        return
    from offload_cpu_copy import patch

    patch.install()
