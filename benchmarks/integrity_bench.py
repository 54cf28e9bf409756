#!/usr/bin/env python3
"""What sealed L2 chunk files (cache.l2.integrity) cost, side by side in one run.

1. The read and write path, per chunk of a Qwen2-7B-shaped KV (256 tokens x 57,344 B = 14 MiB): LMCache's
   way (header, then the KV into a buffer; header + KV written) against the plugin's (the same, plus the
   trailer and a BLAKE3 pass over header + KV), on files in the page cache. That is the worst case for the
   ratio: on the shared L2 a read also crosses the network (1.84 GiB/s in the reference), which the hash
   does not slow. It projects the added time onto the reference's cross-node read of a 1,925-token prompt
   (55.75 ms).
2. With --rig, L2-hit TTFT on the tiered rig (values/cpu.yaml's container, two CPU replicas, the tiny
   model) with integrity on and off, the median of --rounds fresh prompts each.

    .venv/bin/python benchmarks/integrity_bench.py [--chunks 32] [--repeats 5] [--rig] [--rounds 5]

Prints ratios (sealed / LMCache's); asserts nothing. Exit 2 when the rig cannot start.
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kvtier.engine_rig import tiers
from kvtier.engine_rig.errors import RigError
from kvtier.plan.facts import GIB, REFERENCE
from kvtier.podscripts import l2_connector

HEADER_BYTES = 28
QWEN2_7B_CHUNK = 256 * 57_344  # KV bytes of one 256-token chunk (docs/validate.md, the planner)


class Buffer:
    """What LMCache allocates for a chunk: a buffer and a reference count (released when refused)."""

    def __init__(self, size: int) -> None:
        self.byte_array = bytearray(size)

    def ref_count_down(self) -> None:
        pass


def _header(length: int) -> bytes:
    return struct.pack("<i", length) + bytes(HEADER_BYTES - 4)


def _lmcache_read(path: Path) -> Buffer:
    with open(path, "rb") as f:
        (length,) = struct.unpack("<i", f.read(HEADER_BYTES)[:4])
        buffer = Buffer(length)
        f.readinto(buffer.byte_array)
    return buffer


def _sealed_read(path: Path) -> Buffer:
    def declared(header: bytes) -> int:
        return int(struct.unpack("<i", header[:4])[0])

    obj, why = l2_connector.read_sealed(
        path, path.stem, HEADER_BYTES, declared, lambda header: Buffer(declared(header))
    )
    if why is not None:
        raise RuntimeError(f"{path}: {why}")
    return obj


def _lmcache_write(final: Path, temp: Path, header: bytes, payload: bytes) -> None:
    with open(temp, "wb") as f:
        f.write(header)
        f.write(payload)
    os.replace(temp, final)


def _timed(action: Callable[[Path], object], paths: list[Path]) -> float:
    """Seconds per chunk of one pass over `paths`."""
    start = time.perf_counter()
    for path in paths:
        action(path)
    return (time.perf_counter() - start) / len(paths)


def read_write_path(chunks: int, repeats: int, work: Path) -> dict[str, float]:
    payload = os.urandom(QWEN2_7B_CHUNK)
    header = _header(len(payload))
    plain = [work / f"plain-{i}.data" for i in range(chunks)]
    sealed = [work / f"sealed-{i}.data" for i in range(chunks)]
    writes: dict[str, list[float]] = {"lmcache": [], "sealed": []}
    reads: dict[str, list[float]] = {"lmcache": [], "sealed": []}
    for _ in range(repeats):  # alternated, so drift on a shared machine hits both alike
        writes["lmcache"].append(
            _timed(lambda p: _lmcache_write(p, p.with_suffix(".tmp"), header, payload), plain)
        )
        writes["sealed"].append(
            _timed(
                lambda p: l2_connector.write_sealed(p, p.with_suffix(".tmp"), p.stem, header, payload), sealed
            )
        )
        reads["lmcache"].append(_timed(_lmcache_read, plain))
        reads["sealed"].append(_timed(_sealed_read, sealed))
    out = {
        f"{kind}_{way}_ms": statistics.median(v) * 1000
        for kind, d in (("write", writes), ("read", reads))
        for way, v in d.items()
    }
    reference_chunks = REFERENCE.read_tokens / 256
    out["read_added_ms_reference_prompt"] = (
        out["read_sealed_ms"] - out["read_lmcache_ms"]
    ) * reference_chunks
    out["read_sealed_gib_s"] = QWEN2_7B_CHUNK / GIB / (out["read_sealed_ms"] / 1000)
    return out


def rig_ttft(rounds: int, work: Path) -> dict[str, float]:
    out = {}
    for integrity in (True, False):
        with tiers.TieredRig(work / f"integrity-{integrity}", integrity=integrity) as rig:
            result = tiers.measure_tiers(rig, words=2000, repeats=rounds)
        name = "sealed" if integrity else "lmcache"
        out[f"l2_hit_ttft_{name}_ms"] = result["table"][2]["ttft_ms"]
        out[f"cold_ttft_{name}_ms"] = result["table"][0]["ttft_ms"]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=32, help="chunk files per pass (14 MiB each)")
    parser.add_argument("--repeats", type=int, default=5, help="passes per way (medians reported)")
    parser.add_argument("--rig", action="store_true", help="also L2-hit TTFT on the tiered rig, on vs off")
    parser.add_argument("--rounds", type=int, default=5, help="fresh prompts per rig step (with --rig)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kvtier-integrity-") as work:
        path = read_write_path(options.chunks, options.repeats, Path(work))
        print(f"per 14 MiB chunk (Qwen2-7B, 256 tokens), page cache, median of {options.repeats} passes:")
        for kind in ("write", "read"):
            lm, se = path[f"{kind}_lmcache_ms"], path[f"{kind}_sealed_ms"]
            print(f"  {kind}: LMCache's {lm:.2f} ms, sealed {se:.2f} ms: {se / lm:.2f}x (+{se - lm:.2f} ms)")
        print(
            f"  sealed read {path['read_sealed_gib_s']:.2f} GiB/s; added to the reference's 1,925-token "
            f"cross-node read ({REFERENCE.read_ms} ms): +{path['read_added_ms_reference_prompt']:.1f} ms, "
            "one core, chunks one after another"
        )
        if options.rig:
            try:
                ttft = rig_ttft(options.rounds, Path(work))
            except RigError as error:
                print(f"integrity_bench: the rig could not run: {error}", file=sys.stderr)
                return 2
            on, off = ttft["l2_hit_ttft_sealed_ms"], ttft["l2_hit_ttft_lmcache_ms"]
            print(
                f"rig L2-hit TTFT (tiny model, 1 MiB chunks, median of {options.rounds}): "
                f"sealed {on:.0f} ms, LMCache's {off:.0f} ms: {on / off:.2f}x; "
                f"cold {ttft['cold_ttft_sealed_ms']:.0f} / {ttft['cold_ttft_lmcache_ms']:.0f} ms"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
