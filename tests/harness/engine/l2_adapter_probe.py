"""One LMCache multi-process server's L2, as the HyperPod MultiProcess sidecar builds it: the `--l2-adapter`
JSON read by LMCache's own argument parser, the adapter built by LMCache's own factory (its `plugin` type
imports the module from PYTHONPATH), driven through LMCache's L2 adapter interface (store, lookup, load
tasks and their results) on memory objects of LMCache's own class. Runs in the engine venv:

    .venv-engine/bin/python tests/harness/engine/l2_adapter_probe.py CASES.json

CASES: a JSON list; each case {"adapter": "<--l2-adapter JSON>", "pythonpath": [...], "ops": [{"op":
"store"|"load", "seeds": [...]}]} runs on its own adapter, one after another. Each seed names one chunk: its
key (model /opt/ml/model, rank 0, hash from the seed) and its KV (CHUNK_BYTES drawn from the seed). Prints
one JSON line per case, {"class": the adapter's class, "results": one per op}: store {"ok", "bytes"}; load
{"found" (lookup), "loaded", "data_ok"} per seed, data_ok comparing the loaded bytes with the seed's KV.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
from lmcache.v1.distributed.api import ObjectKey
from lmcache.v1.distributed.l2_adapters import create_l2_adapter
from lmcache.v1.distributed.l2_adapters.config import add_l2_adapters_args, parse_args_to_l2_adapters_config
from lmcache.v1.memory_management import MemoryObjMetadata, TensorMemoryObj

CHUNK_BYTES = 64 * 1024  # a whole number of pages, as KV chunks are
TIMEOUT_S = 60


def key_of(seed: int) -> ObjectKey:
    return ObjectKey(
        chunk_hash=hashlib.sha256(str(seed).encode()).digest()[:16], model_name="/opt/ml/model", kv_rank=0
    )


def memory(data: bytes | None) -> TensorMemoryObj:
    raw = torch.zeros(CHUNK_BYTES, dtype=torch.uint8)
    if data is not None:
        raw.copy_(torch.frombuffer(bytearray(data), dtype=torch.uint8))
    meta = MemoryObjMetadata(
        shape=torch.Size([CHUNK_BYTES]), dtype=torch.uint8, address=0, phy_size=CHUNK_BYTES, ref_count=1
    )
    return TensorMemoryObj(raw, meta, None)


def kv_of(seed: int) -> bytes:
    return (
        torch.randint(
            0, 256, (CHUNK_BYTES,), dtype=torch.uint8, generator=torch.Generator().manual_seed(seed)
        )
        .numpy()
        .tobytes()
    )


def wait(poll: Any) -> Any:
    deadline = time.monotonic() + TIMEOUT_S
    while (result := poll()) is None:
        if time.monotonic() > deadline:
            raise TimeoutError("the adapter's task did not finish")
        time.sleep(0.01)
    return result


def run(adapter: Any, op: dict[str, Any]) -> dict[str, Any]:
    keys = [key_of(seed) for seed in op["seeds"]]
    if op["op"] == "store":
        task = adapter.submit_store_task(keys, [memory(kv_of(seed)) for seed in op["seeds"]])
        done: dict[Any, Any] = {}

        def stored() -> Any:
            done.update(adapter.pop_completed_store_tasks())
            return done.get(task)

        result = wait(stored)
        return {"ok": result.is_successful(), "bytes": result.bytes_transferred()}
    lookup = adapter.submit_lookup_and_lock_task(keys, {})
    found = wait(lambda: adapter.query_lookup_and_lock_result(lookup))
    objects = [memory(None) for _ in keys]
    task = adapter.submit_load_task(keys, objects)
    loaded = wait(lambda: adapter.query_load_result(task))
    return {
        "found": [found.test(i) for i in range(len(keys))],
        "loaded": [loaded.test(i) for i in range(len(keys))],
        "data_ok": [bytes(o.byte_array) == kv_of(seed) for o, seed in zip(objects, op["seeds"], strict=True)],
    }


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    sys.dont_write_bytecode = True  # the podscripts folder on the path is the chart's own
    for entry in reversed(case.get("pythonpath", [])):  # as the sidecar's PYTHONPATH would
        if entry not in sys.path:
            sys.path.insert(0, entry)
    parser = add_l2_adapters_args(argparse.ArgumentParser())
    (config,) = parse_args_to_l2_adapters_config(
        parser.parse_args(["--l2-adapter", case["adapter"]])
    ).adapters
    adapter = create_l2_adapter(config)
    try:
        return {"class": type(adapter).__name__, "results": [run(adapter, op) for op in case["ops"]]}
    finally:
        adapter.close()


if __name__ == "__main__":
    for case in json.loads(Path(sys.argv[1]).read_text()):
        print(json.dumps(run_case(case)), flush=True)
