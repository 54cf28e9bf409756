"""Chunk files of vLLM's native fs tier written and read by the pinned vLLM's own I/O
(vllm/v1/kv_offload/tiering/fs/io.py, its C extension where the wheel has it) and by the chart's sealed tier
(podscripts/l2_native.py, the copy the pods import), with and without a change in place. Runs in the engine
venv:

    .venv-engine/bin/python tests/harness/engine/native_io_probe.py CASES.json

CASES: a JSON list; each case {"writer": "vllm" | "sealed", "damage": "none" | "changed", "reader": "vllm" |
"sealed"}, {"signature": true}, or {"tier": true} (the tier built by vLLM's factory, through its jobs).
Prints one JSON line per case: for I/O {"loaded", "same" (the loaded KV equals the stored KV), "error",
"num_succeeded", "sizes", "o_direct"}; for "signature", whether the sealed tier's constructor takes exactly
the keyword arguments vLLM's fs tier takes; for "tier", the jobs' results.
"""

from __future__ import annotations

import inspect
import json
import mmap
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[3] / "charts/kv-tiered-inference/files/podscripts"))

import l2_integrity
import l2_native
from vllm.v1.kv_offload.tiering.fs.io import O_DIRECT, batch_load_block, batch_store_block, probe_o_direct
from vllm.v1.kv_offload.tiering.fs.manager import FileSystemTierManager

BLOCK = 16 * 4096  # one chunk slot: page-aligned, as the CPU tier's rows are
CHUNKS = 2


def region(fill: bytes | None = None) -> mmap.mmap:
    """A page-aligned buffer of CHUNKS slots (the CPU tier's region is an mmap too)."""
    buffer = mmap.mmap(-1, CHUNKS * BLOCK)
    buffer[:] = fill if fill is not None else os.urandom(CHUNKS * BLOCK)
    return buffer


def io_case(case: dict[str, Any], root: str) -> dict[str, Any]:
    o_direct = probe_o_direct(root)
    flag = O_DIRECT if o_direct else 0
    paths = [os.path.join(root, f"m_0123456789ab_r0/abc/de_g0/{i:040x}.bin") for i in range(CHUNKS)]
    offsets = [i * BLOCK for i in range(CHUNKS)]
    source = region()
    if case["writer"] == "vllm":
        for path in paths:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        batch_store_block(paths, memoryview(source), offsets, BLOCK, o_direct)
    else:
        l2_native.store_blocks(root, paths, memoryview(source), offsets, BLOCK, flag)
    sizes = [os.path.getsize(p) for p in paths]
    if case["damage"] == "changed":  # 64 bytes inverted in the second chunk's KV; size unchanged
        with open(paths[1], "r+b") as f:
            f.seek(BLOCK // 2)
            data = f.read(64)
            f.seek(BLOCK // 2)
            f.write(bytes(b ^ 0xFF for b in data))
    target = region(bytes(CHUNKS * BLOCK))
    verdict: dict[str, Any] = {"sizes": sizes, "o_direct": o_direct, "error": None, "num_succeeded": None}
    try:
        if case["reader"] == "vllm":
            batch_load_block(paths, memoryview(target), offsets, BLOCK, o_direct)
        else:
            l2_native.load_blocks(
                root, paths, memoryview(target), offsets, BLOCK, flag, l2_integrity.Rejections()
            )
        verdict["loaded"] = True
    except OSError as error:
        verdict.update(loaded=False, error=str(error), num_succeeded=getattr(error, "num_succeeded", None))
    verdict["same"] = target[:] == source[:]
    verdict["first_same"] = target[:BLOCK] == source[:BLOCK]
    return verdict


def signature_case() -> dict[str, Any]:
    tier = l2_native.KvtierSealedFsTier

    def params(function: Any) -> list[tuple[str, Any]]:
        return [(p.name, p.default) for p in inspect.signature(function).parameters.values()]

    return {
        "subclass": issubclass(tier, FileSystemTierManager),
        "ours": [name for name, _ in params(tier.__init__)],
        "same_parameters": params(tier.__init__) == params(FileSystemTierManager.__init__),
    }


def tier_case(root: str) -> dict[str, Any]:
    """The sealed tier as vLLM's tiering spec builds it (SecondaryTierFactory, on a stand-in KV cache
    description, offload_stand_in.py), driven through its job interface: two chunks stored, the second
    changed in place, both loaded back. What vLLM's manager then reads from get_finished_jobs."""
    import numpy as np
    from product_probes import load  # this folder is first on sys.path: the probe runs by path
    from vllm.config import CacheConfig, KVTransferConfig, ParallelConfig
    from vllm.v1.kv_offload.base import ReqContext, make_offload_key
    from vllm.v1.kv_offload.factory import OffloadingSpecFactory
    from vllm.v1.kv_offload.tiering.base import TransferJob
    from vllm.v1.kv_offload.tiering.factory import SecondaryTierFactory

    tier_config = {"type": l2_native.CLASS_NAME, "module_path": l2_native.MODULE, "root_dir": root}
    extra = {"spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": 1 << 26, "block_size": 16}
    transfer = KVTransferConfig(
        kv_connector="OffloadingConnector",
        kv_role="kv_both",
        kv_connector_extra_config={**extra, "secondary_tiers": [tier_config]},
    )
    config = load("offload_stand_in").offloading_config(
        transfer, "m", "float32", 16, ParallelConfig(), CacheConfig()
    )
    spec = OffloadingSpecFactory.create_spec(config)
    primary = region()
    view = memoryview(primary).cast("B", (CHUNKS, BLOCK))  # the CPU tier: one row per chunk slot
    stored = bytes(primary)
    tier = SecondaryTierFactory.create_secondary_tier(dict(tier_config), view, spec)
    keys = [make_offload_key(bytes([i + 1]) * 32, 0) for i in range(CHUNKS)]
    context = ReqContext(req_id="probe")

    def finished(job_id: int) -> Any:
        for _ in range(1000):
            for result in tier.get_finished_jobs():
                if result.job_id == job_id:
                    return result
            time.sleep(0.01)
        raise TimeoutError(f"job {job_id} never finished")

    try:
        tier.submit_store(TransferJob(1, keys, np.arange(CHUNKS), False, context))
        store = finished(1)
        paths = [tier.file_mapper.get_file_name(key) for key in keys]
        with open(paths[1], "r+b") as f:  # the second chunk changed in place
            f.seek(BLOCK // 2)
            data = f.read(64)
            f.seek(BLOCK // 2)
            f.write(bytes(b ^ 0xFF for b in data))
        primary[:] = bytes(CHUNKS * BLOCK)
        tier.submit_load(TransferJob(2, keys, np.arange(CHUNKS), True, context))
        loaded = finished(2)
    finally:
        tier.shutdown()
    kept = [keys.index(k) for k in loaded.successful_keys or ()]
    return {
        "class": type(tier).__name__,
        "store_success": store.success,
        "sizes": [os.path.getsize(p) if os.path.exists(p) else None for p in paths],
        "load_success": loaded.success,
        "kept": kept,
        "kept_same": all(
            primary[i * BLOCK : (i + 1) * BLOCK] == stored[i * BLOCK : (i + 1) * BLOCK] for i in kept
        ),
        "rejections": dict(tier.rejections.counts),
    }


def main(path: Path) -> None:
    for case in json.loads(path.read_text()):
        with tempfile.TemporaryDirectory(dir=path.parent) as root:
            if case.get("signature"):
                verdict = signature_case()
            elif case.get("tier"):
                verdict = tier_case(root)
            else:
                verdict = io_case(case, root)
        print(json.dumps(verdict, default=repr), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
