"""Where the stand-in plugs into the pinned vLLM (toolchain/versions.env), on the CPU platform only.

`CPUOffloadingSpec.get_worker` refuses every device but CUDA-alike and XPU ones, before it builds a
`CPUOffloadingWorker`, whose two copy directions assert CUDA tensors and run a CUDA kernel. Everything
around them (the scheduler side, the CPU tier's shared memory region, the secondary tiers such as `fs`)
is device-independent. So on CPU: the spec modules build `CPUCopyWorker` where they would build
`CPUOffloadingWorker`, and `get_worker` skips the device check. Nothing changes on any other platform.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

log = logging.getLogger("offload_cpu_copy")
# The modules that name CPUOffloadingWorker when they build a worker (TieringOffloadingSpec inherits from
# CPUOffloadingSpec, but looks the class up in its own module).
SPEC_MODULES = ("vllm.v1.kv_offload.cpu.spec", "vllm.v1.kv_offload.tiering.spec")


def _on_cpu() -> bool:
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


def install() -> None:
    if not _on_cpu():
        return
    from offload_cpu_copy.worker import CPUCopyWorker

    for name in SPEC_MODULES:
        module = importlib.import_module(name)
        module.CPUOffloadingWorker = CPUCopyWorker  # type: ignore[attr-defined]
    spec_class = importlib.import_module(SPEC_MODULES[0]).CPUOffloadingSpec
    if getattr(spec_class.get_worker, "_offload_cpu_copy", False):
        return

    def get_worker(self: Any, kv_caches: Any) -> Any:
        if self._worker is None:
            log.warning("offload-cpu-copy: torch stand-in for vLLM's CUDA offloading copy (test rig only)")
            self._worker = self.create_worker(kv_caches)
        return self._worker

    get_worker._offload_cpu_copy = True  # type: ignore[attr-defined]
    spec_class.get_worker = get_worker
