"""The offload-cpu-copy stand-in (tools/offload-cpu-copy) against the pinned vLLM: vLLM's own descriptors for
an offloading transfer (compute_sub_block_ptrs via _fill_direct_ops, carried out with memmove) must give the
same CPU-tier chunk bytes on store and the same engine blocks on load as the stand-in's worker; vLLM's spec
must refuse this CPU platform without the plugin and build the stand-in with it (offload_copy_probe.py). If
vLLM changes its chunk layout, this fails before the rig writes an fs-tier file in the wrong order."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from harness import engine as engine_probes
from kvtier.engine_rig import rig as engine_rig
from kvtier.engine_rig.errors import RigError

PROBE = Path(engine_probes.__file__).with_name("offload_copy_probe.py")
# vLLM's own words (vllm/v1/kv_offload/cpu/spec.py, CPUOffloadingSpec.get_worker)
REFUSAL = "CPU Offloading is currently only supported on CUDA-alike and XPU GPUs"


def test_stand_in_copies_as_vllms_own_descriptors_do(need) -> None:
    try:
        python = engine_rig.engine_python()
    except RigError as error:
        need(False, f"engine rig unavailable: {error}")
    proc = subprocess.run([str(python), str(PROBE)], capture_output=True, text=True, timeout=300)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines and proc.returncode == 0, f"the probe printed no verdict:\n{proc.stderr[-2000:]}"
    verdict = json.loads(lines[-1])
    assert verdict["store_ok"], "engine blocks land elsewhere in the CPU-tier chunks than vLLM puts them"
    assert verdict["load_ok"], "chunk bytes load back elsewhere in the engine blocks than vLLM loads them"
    assert verdict["bytes"] == 5 * (4096 + 3000) + 3 * 2048  # unpadded pages only, as vLLM counts them
    assert REFUSAL in verdict["refusal"], verdict["refusal"]
    assert verdict["patched_worker"] == "CPUCopyWorker"
