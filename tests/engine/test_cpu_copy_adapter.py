"""The CPU KV-copy stand-in (tools/lmcache-cpu-copy) against the pinned vLLM's own CPU cache-write kernel:
K/V written by `cpu_attn_reshape_and_cache` must read back exactly in LMCache's KV_2LTD order and be put
back byte for byte (engine_rig/copy_layout_probe.py, run in the engine venv). If vLLM changes its CPU block
layout, this fails before any L2 file is written in the wrong order."""

from __future__ import annotations

import json
import subprocess

import pytest

from kvtier.engine_rig import rig as engine_rig
from kvtier.engine_rig.errors import RigError
from kvtier.engine_rig.tiers import ADAPTER_PROBE


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_adapter_matches_vllms_cpu_kv_layout(dtype: str, need) -> None:
    try:
        python = engine_rig.engine_python()
    except RigError as error:
        need(False, f"engine rig unavailable: {error}")
    proc = subprocess.run(
        [str(python), str(ADAPTER_PROBE), dtype], capture_output=True, text=True, timeout=300
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, f"the probe printed no verdict:\n{proc.stderr[-2000:]}"
    verdict = json.loads(lines[-1])
    assert verdict["read_ok"], f"from_gpu misreads vLLM's {verdict['isa']} layout ({dtype})"
    assert verdict["write_ok"], f"to_gpu misplaces KV in vLLM's {verdict['isa']} layout ({dtype})"
    assert proc.returncode == 0


def test_both_stand_ins_are_registered_for_vllm(need) -> None:
    """lmcache-cpu-copy and offload-cpu-copy (test_offload_cpu_copy.py) load as vLLM general plugins."""
    try:
        python = engine_rig.engine_python()
    except RigError as error:
        need(False, f"engine rig unavailable: {error}")
    script = (
        "from importlib.metadata import entry_points;"
        "print([e.value for e in entry_points(group='vllm.general_plugins')])"
    )
    proc = subprocess.run([str(python), "-c", script], capture_output=True, text=True, timeout=60)
    assert "lmcache_cpu_copy:register" in proc.stdout and "offload_cpu_copy:register" in proc.stdout
