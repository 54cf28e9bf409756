#!/usr/bin/env python3
"""What sealed L2 chunk files (cache.l2.integrity) cost, side by side in one run.

1. The read and write path, per chunk of a Qwen2-7B-shaped KV (256 tokens x 57,344 B = 14 MiB): LMCache's
   way (header, then the KV into a buffer; header + KV written) against the plugin's (the same, plus the
   trailer and a BLAKE3 pass over header + KV), on files in the page cache. That is the worst case for the
   ratio: on the shared L2 a read also crosses the network (1.84 GiB/s in the reference), which the hash
   does not slow. It projects the added time onto the reference's cross-node read of a 1,925-token prompt
   (55.75 ms).
   With --backend vllm-native: vLLM's fs-tier way (the KV written, and read back with one readv into a
   page-aligned slot, O_DIRECT where the file system takes it: the syscalls of vLLM 0.32's
   tiering/fs/io.py) against the sealed tier's (podscripts/l2_native.py: a trailer page more, and BLAKE3
   over the KV); and one prompt's load of the reference's 7 whole chunks, vLLM's way (one thread, one
   chunk after another) against the sealed tier's (a task per chunk on a 16-thread pool).
2. With --rig, L2-hit TTFT on the tiered rig (values/cpu.yaml's container with --backend, two CPU replicas,
   the tiny model) with integrity on and off, the median of --rounds fresh prompts each.

    .venv/bin/python benchmarks/integrity_bench.py [--backend lmcache|vllm-native] [--chunks 32]
        [--repeats 5] [--rig] [--rounds 5] [--dir DIR]

Prints ratios (sealed / unsealed); asserts nothing. Exit 2 when the rig cannot start.
"""

from __future__ import annotations

import argparse
import mmap
import os
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kvtier.engine_rig import tiers
from kvtier.engine_rig.errors import RigError
from kvtier.plan.facts import GIB, REFERENCE
from kvtier.podscripts import l2_blocks, l2_connector, l2_native

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


def _native_flag(work: Path) -> int:
    """O_DIRECT when `work`'s file system takes it (vLLM probes the same way, else buffered I/O)."""
    probe, page = work / ".probe", mmap.mmap(-1, l2_native.PAGE)
    try:
        fd = os.open(probe, os.O_CREAT | os.O_WRONLY | os.O_DIRECT, 0o644)
        try:
            os.write(fd, page)
        finally:
            os.close(fd)
        return os.O_DIRECT
    except OSError:
        return 0
    finally:
        probe.unlink(missing_ok=True)


def _vllm_write(final: Path, block: memoryview, flag: int) -> None:
    temp = f"{final}_0.tmp"
    fd = os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_TRUNC | flag, 0o644)
    try:
        os.write(fd, block)
    finally:
        os.close(fd)
    os.replace(temp, final)


def _vllm_read(path: Path, block: memoryview, flag: int) -> None:
    fd = os.open(path, os.O_RDONLY | flag)
    try:
        if os.readv(fd, [block]) < len(block):
            raise RuntimeError(f"{path}: short read")
    finally:
        os.close(fd)


def _native_read(path: Path, block: memoryview, flag: int) -> None:
    why = l2_blocks.load_block(str(path), path.name, block, flag)
    if why is not None:
        raise RuntimeError(f"{path}: {why}")


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
    writes: dict[str, list[float]] = {"plain": [], "sealed": []}
    reads: dict[str, list[float]] = {"plain": [], "sealed": []}
    for _ in range(repeats):  # alternated, so drift on a shared machine hits both alike
        writes["plain"].append(
            _timed(lambda p: _lmcache_write(p, p.with_suffix(".tmp"), header, payload), plain)
        )
        writes["sealed"].append(
            _timed(
                lambda p: l2_connector.write_sealed(p, p.with_suffix(".tmp"), p.stem, header, payload), sealed
            )
        )
        reads["plain"].append(_timed(_lmcache_read, plain))
        reads["sealed"].append(_timed(_sealed_read, sealed))
    return _summary(writes, reads)


def _summary(writes: dict[str, list[float]], reads: dict[str, list[float]]) -> dict[str, float]:
    out = {
        f"{kind}_{way}_ms": statistics.median(v) * 1000
        for kind, d in (("write", writes), ("read", reads))
        for way, v in d.items()
    }
    reference_chunks = REFERENCE.read_tokens / 256
    out["read_added_ms_reference_prompt"] = (out["read_sealed_ms"] - out["read_plain_ms"]) * reference_chunks
    out["read_sealed_gib_s"] = QWEN2_7B_CHUNK / GIB / (out["read_sealed_ms"] / 1000)
    return out


def native_read_write_path(chunks: int, repeats: int, work: Path) -> dict[str, float]:
    """The same passes as read_write_path for vLLM's native fs tier: its way, and the sealed tier's."""
    flag = _native_flag(work)
    source, target = mmap.mmap(-1, QWEN2_7B_CHUNK), mmap.mmap(-1, QWEN2_7B_CHUNK)  # page-aligned slots
    source[:] = os.urandom(QWEN2_7B_CHUNK)
    block, into = memoryview(source), memoryview(target)
    plain = [work / f"plain-{i}.bin" for i in range(chunks)]
    sealed = [work / f"sealed-{i}.bin" for i in range(chunks)]
    writes: dict[str, list[float]] = {"plain": [], "sealed": []}
    reads: dict[str, list[float]] = {"plain": [], "sealed": []}
    for _ in range(repeats):
        for path in (*plain, *sealed):  # both stores skip a chunk already there: time fresh writes
            path.unlink(missing_ok=True)
        writes["plain"].append(_timed(lambda p: _vllm_write(p, block, flag), plain))
        writes["sealed"].append(_timed(lambda p: l2_blocks.store_block(str(p), p.name, block, flag), sealed))
        reads["plain"].append(_timed(lambda p: _vllm_read(p, into, flag), plain))
        reads["sealed"].append(_timed(lambda p: _native_read(p, into, flag), sealed))
    return (
        _summary(writes, reads)
        | {"o_direct": float(bool(flag))}
        | _prompt_loads(plain, sealed, flag, repeats)
    )


def _prompt_loads(plain: list[Path], sealed: list[Path], flag: int, repeats: int) -> dict[str, float]:
    """One prompt's load, the reference's 1,792 whole-chunk tokens (7 chunks): vLLM's tier reads a job's
    chunks one after another on one thread; the sealed tier queues a task per chunk on its pool (16 read
    threads by default), so they are read and hashed side by side."""
    n = int(REFERENCE.read_tokens // 256)
    slots = mmap.mmap(-1, n * QWEN2_7B_CHUNK)
    views = [memoryview(slots)[i * QWEN2_7B_CHUNK : (i + 1) * QWEN2_7B_CHUNK] for i in range(n)]
    times: dict[str, list[float]] = {"plain": [], "sealed": []}
    with ThreadPoolExecutor(max_workers=16) as pool:
        for _ in range(repeats):
            start = time.perf_counter()
            for path, view in zip(plain[:n], views, strict=True):
                _vllm_read(path, view, flag)
            times["plain"].append(time.perf_counter() - start)
            start = time.perf_counter()
            list(
                pool.map(
                    lambda pair: _native_read(pair[0], pair[1], flag), zip(sealed[:n], views, strict=True)
                )
            )
            times["sealed"].append(time.perf_counter() - start)
    return {f"prompt_{way}_ms": statistics.median(v) * 1000 for way, v in times.items()} | {
        "prompt_chunks": n
    }


def rig_ttft(rounds: int, work: Path, backend: str) -> dict[str, float]:
    out = {}
    for integrity in (True, False):
        rig_dir = work / f"integrity-{integrity}"
        with tiers.TieredRig(rig_dir, backend=backend, integrity=integrity) as rig:
            result = tiers.measure_tiers(rig, words=2000, repeats=rounds)
        name = "sealed" if integrity else "plain"
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
    parser.add_argument("--dir", type=Path, help="where the chunk files go (default: the temp folder)")
    parser.add_argument(
        "--backend",
        choices=(tiers.LMCACHE, tiers.NATIVE),
        default=tiers.LMCACHE,
        help="whose chunk files: LMCache's fs connector (default) or vLLM's native fs tier",
    )
    options = parser.parse_args()
    native = options.backend == tiers.NATIVE
    theirs = "vLLM's" if native else "LMCache's"
    with tempfile.TemporaryDirectory(prefix="kvtier-integrity-", dir=options.dir) as work:
        measure = native_read_write_path if native else read_write_path
        path = measure(options.chunks, options.repeats, Path(work))
        how = (
            ("O_DIRECT" if path["o_direct"] else "buffered, O_DIRECT refused here")
            if native
            else "page cache"
        )
        print(f"per 14 MiB chunk (Qwen2-7B, 256 tokens), {how}, median of {options.repeats} passes:")
        for kind in ("write", "read"):
            lm, se = path[f"{kind}_plain_ms"], path[f"{kind}_sealed_ms"]
            print(f"  {kind}: {theirs} {lm:.2f} ms, sealed {se:.2f} ms: {se / lm:.2f}x (+{se - lm:.2f} ms)")
        print(
            f"  sealed read {path['read_sealed_gib_s']:.2f} GiB/s; added to the reference's 1,925-token "
            f"cross-node read ({REFERENCE.read_ms} ms): +{path['read_added_ms_reference_prompt']:.1f} ms, "
            "one core, chunks one after another"
        )
        if native:
            lm, se = path["prompt_plain_ms"], path["prompt_sealed_ms"]
            print(
                f"  one prompt's load ({path['prompt_chunks']:.0f} chunks: the reference's whole chunks): "
                f"{theirs} {lm:.1f} ms (one thread), sealed {se:.1f} ms (a task per chunk): {se / lm:.2f}x"
            )
        if options.rig:
            try:
                ttft = rig_ttft(options.rounds, Path(work), options.backend)
            except RigError as error:
                print(f"integrity_bench: the rig could not run: {error}", file=sys.stderr)
                return 2
            on, off = ttft["l2_hit_ttft_sealed_ms"], ttft["l2_hit_ttft_plain_ms"]
            print(
                f"rig L2-hit TTFT (tiny model, 1 MiB chunks, median of {options.rounds}): "
                f"{options.backend}: sealed {on:.0f} ms, {theirs} {off:.0f} ms: {on / off:.2f}x; "
                f"cold {ttft['cold_ttft_sealed_ms']:.0f} / {ttft['cold_ttft_plain_ms']:.0f} ms"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
