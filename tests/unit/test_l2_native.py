"""The sealed native fs tier's I/O (podscripts/l2_native.py) on real files, buffered and with O_DIRECT where
the test's file system takes it: whatever changes in a chunk file after it was written, a load refuses it,
removes it and stops where vLLM's own failed read stops. With vLLM's real tier, scheduler and engines,
tests/engine/test_native_integrity.py checks the same on the real read path.

The oracle for the format is BLAKE3 computed here from the layout l2_integrity's docstring states (KV, then
one page: magic, 16 digest bytes, zeros), not the module's own functions.
"""

from __future__ import annotations

import logging
import mmap
import os
from pathlib import Path

import blake3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvtier.podscripts import l2_blocks, l2_integrity, l2_native

PAGE = 4096
BLOCK = 2 * PAGE  # one chunk slot of the CPU tier: page-aligned, as vLLM's rows are
NAME = "tiny_0123456789ab_r0/abc/de_g0/abcdef0123.bin"


def _o_direct_works(directory: Path) -> bool:
    probe = directory / ".probe"
    page = mmap.mmap(-1, PAGE)
    try:
        fd = os.open(probe, os.O_CREAT | os.O_WRONLY | os.O_DIRECT, 0o644)
        try:
            os.write(fd, page)
        finally:
            os.close(fd)
        return True
    except OSError:
        return False
    finally:
        probe.unlink(missing_ok=True)


@pytest.fixture(params=["buffered", "o_direct"])
def o_direct(request: pytest.FixtureRequest, tmp_path: Path) -> int:
    if request.param == "buffered":
        return 0
    # the engines probe the same way (vLLM's probe_o_direct) and fall back to buffered I/O where refused
    if not _o_direct_works(tmp_path):
        pytest.skip(f"this file system refuses O_DIRECT at {tmp_path} (the buffered case still runs)")
    return os.O_DIRECT


def cpu_tier(blocks: int, seed: int = 1) -> memoryview:
    """A page-aligned buffer of `blocks` chunk slots with distinct bytes, as the CPU tier's region is."""
    region = mmap.mmap(-1, blocks * BLOCK)
    region[:] = bytes((seed + i * 7 + i // 251) % 256 for i in range(blocks * BLOCK))
    return memoryview(region)


def expected_page(name: str, kv: bytes) -> bytes:
    encoded = name.encode()
    digest = blake3.blake3(len(encoded).to_bytes(4, "little") + encoded + kv).digest(length=16)
    return (b"kvtsum\x00\x01" + digest).ljust(PAGE, b"\0")


def store(root: Path, names: list[str], view: memoryview, o_direct: int) -> list[str]:
    paths = [str(root / name) for name in names]
    l2_native.store_blocks(str(root), paths, view, [i * BLOCK for i in range(len(names))], BLOCK, o_direct)
    return paths


def load(root: Path, paths: list[str], view: memoryview, o_direct: int) -> l2_integrity.Rejections:
    rejections = l2_integrity.Rejections()
    l2_native.load_blocks(
        str(root), paths, view, [i * BLOCK for i in range(len(paths))], BLOCK, o_direct, rejections
    )
    return rejections


def names(n: int) -> list[str]:
    return [f"tiny_0123456789ab_r0/abc/de_g0/{i:040x}.bin" for i in range(n)]


def test_a_sealed_file_is_the_kv_then_one_trailer_page(tmp_path: Path, o_direct: int) -> None:
    view = cpu_tier(2)
    [first, second] = store(tmp_path, names(2), view, o_direct)
    for path, i in ((first, 0), (second, 1)):
        data = Path(path).read_bytes()
        kv = bytes(view[i * BLOCK : (i + 1) * BLOCK])
        # vLLM's own reader reads exactly the KV's length from the start: it still reads sealed files
        assert data[:BLOCK] == kv
        assert data[BLOCK:] == expected_page(names(2)[i], kv)
    assert sorted(p.name for p in (tmp_path / "tiny_0123456789ab_r0/abc/de_g0").iterdir()) == sorted(
        Path(p).name for p in (first, second)
    )  # no temp file left behind


def test_a_round_trip_loads_every_chunk(tmp_path: Path, o_direct: int) -> None:
    source = cpu_tier(3)
    paths = store(tmp_path, names(3), source, o_direct)
    target = cpu_tier(3, seed=99)
    rejections = load(tmp_path, paths, target, o_direct)
    assert bytes(target) == bytes(source) and not rejections.counts


def test_a_chunk_already_stored_is_left_as_it_is(tmp_path: Path) -> None:
    [path] = store(tmp_path, names(1), cpu_tier(1), 0)
    before = Path(path).read_bytes()
    store(tmp_path, names(1), cpu_tier(1, seed=5), 0)
    assert Path(path).read_bytes() == before


def damage_and_load(
    tmp_path: Path, where: int, xor: int
) -> tuple[OSError, l2_integrity.Rejections, memoryview]:
    source = cpu_tier(3)
    paths = store(tmp_path, names(3), source, 0)
    middle = Path(paths[1])
    data = bytearray(middle.read_bytes())
    data[where % len(data)] ^= xor
    middle.write_bytes(bytes(data))
    target = cpu_tier(3, seed=99)
    rejections = l2_integrity.Rejections()
    with pytest.raises(OSError, match="failed verification") as raised:
        l2_native.load_blocks(str(tmp_path), paths, target, [0, BLOCK, 2 * BLOCK], BLOCK, 0, rejections)
    assert not middle.exists()  # removed: the next store of that chunk writes a good one
    assert bytes(target[:BLOCK]) == bytes(source[:BLOCK])  # the chunk before it loaded and is kept
    return raised.value, rejections, target


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.integers(min_value=0), xor=st.integers(1, 255))
def test_any_changed_byte_stops_the_load_at_that_chunk(
    tmp_path_factory: pytest.TempPathFactory, where: int, xor: int
) -> None:
    error, rejections, _ = damage_and_load(tmp_path_factory.mktemp("l2"), where, xor)
    # what vLLM's tier keeps: the chunks before the failed one; this one and the rest are recomputed
    assert error.num_succeeded == 1  # type: ignore[attr-defined]
    assert rejections.counts == {l2_integrity.MISMATCH: 1}


def test_a_rejection_is_logged_with_its_file_and_counts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="kvtier.l2"):
        damage_and_load(tmp_path, 10, 1)
    [record] = caplog.records
    assert "failed verification (mismatch), served as a miss and removed" in record.getMessage()
    assert names(3)[1] in record.getMessage() and "'mismatch': 1" in record.getMessage()


@pytest.mark.parametrize(
    ("size", "why"),
    [
        (BLOCK, l2_integrity.UNSEALED),  # vLLM's own fs tier wrote it (or integrity was off)
        (BLOCK + PAGE - 1, l2_integrity.SHORT),
        (BLOCK - 1, l2_integrity.SHORT),
        (BLOCK + PAGE + 1, l2_integrity.MISMATCH),
        (BLOCK + 2 * PAGE, l2_integrity.MISMATCH),
    ],
)
def test_a_file_of_another_size_is_refused_before_reading(tmp_path: Path, size: int, why: str) -> None:
    [path] = store(tmp_path, names(1), cpu_tier(1), 0)
    data = Path(path).read_bytes()
    Path(path).write_bytes((data + bytes(2 * PAGE))[:size])
    target = cpu_tier(1, seed=99)
    untouched = bytes(target)
    rejections = l2_integrity.Rejections()
    with pytest.raises(OSError) as raised:
        l2_native.load_blocks(str(tmp_path), [path], target, [0], BLOCK, 0, rejections)
    assert raised.value.num_succeeded == 0  # type: ignore[attr-defined]
    assert rejections.counts == {why: 1}
    assert bytes(target) == untouched  # refused on its size: nothing was read into the CPU tier


def test_a_sealed_file_under_another_chunk_s_name_is_refused(tmp_path: Path) -> None:
    first, second = store(tmp_path, names(2), cpu_tier(2), 0)
    os.replace(first, second)  # a good file, under the wrong name
    rejections = l2_integrity.Rejections()
    with pytest.raises(OSError, match="failed verification"):
        l2_native.load_blocks(str(tmp_path), [second], cpu_tier(1), [0], BLOCK, 0, rejections)
    assert rejections.counts == {l2_integrity.MISMATCH: 1}


def test_the_name_is_the_path_below_the_tier_root(tmp_path: Path) -> None:
    """Moving the whole namespace (another mount path) keeps every file valid: only the part below root_dir
    is sealed."""
    paths = store(tmp_path / "a", names(2), cpu_tier(2), 0)
    os.rename(tmp_path / "a", tmp_path / "b")
    moved = [p.replace(str(tmp_path / "a"), str(tmp_path / "b")) for p in paths]
    assert not load(tmp_path / "b", moved, cpu_tier(2, seed=3), 0).counts


def test_a_chunk_evicted_since_its_lookup_is_a_failed_read_not_a_rejection(tmp_path: Path) -> None:
    first, second = store(tmp_path, names(2), cpu_tier(2), 0)
    os.remove(second)
    rejections = l2_integrity.Rejections()
    with pytest.raises(FileNotFoundError) as raised:
        l2_native.load_blocks(str(tmp_path), [first, second], cpu_tier(2), [0, BLOCK], BLOCK, 0, rejections)
    assert raised.value.num_succeeded == 1  # type: ignore[attr-defined]
    assert not rejections.counts and Path(first).exists()


@pytest.mark.parametrize("failing", ["writev", "replace"])
def test_a_failed_write_leaves_neither_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    def broken(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(l2_blocks.os, failing, broken)
    [name] = names(1)
    with pytest.raises(OSError, match="No space left"):
        l2_blocks.store_block(str(tmp_path / name), name, cpu_tier(1)[:BLOCK], 0)
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_a_slot_outside_the_cpu_tier_is_refused_before_any_io(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="outside the 8192-byte CPU tier"):
        store(tmp_path, names(2), cpu_tier(1), 0)  # the second slot would be a short slice
    with pytest.raises(ValueError, match="outside"):
        l2_native.load_blocks(
            str(tmp_path), ["x"], cpu_tier(1), [-BLOCK], BLOCK, 0, l2_integrity.Rejections()
        )
    assert list(tmp_path.iterdir()) == []


def test_the_tier_class_is_built_on_first_access() -> None:
    assert "KvtierSealedFsTier" not in vars(l2_native)  # the toolkit imports the module without vLLM
    with pytest.raises(ModuleNotFoundError, match="vllm"):
        l2_native.KvtierSealedFsTier  # noqa: B018
    with pytest.raises(AttributeError):
        l2_native.NoSuchTier  # noqa: B018


def test_a_temp_name_taken_by_another_writer_is_left_to_it(tmp_path: Path, monkeypatch) -> None:
    """Temp names are random (process and thread ids repeat across the pods of a Deployment); should one be
    taken anyway, the store fails without removing the other writer's file."""
    final = str(tmp_path / "chunk")
    assert len({l2_blocks._temp_name(final) for _ in range(50)}) == 50
    taken = tmp_path / "chunk_1.tmp"
    taken.write_bytes(b"another writer's bytes")
    monkeypatch.setattr(l2_blocks, "_temp_name", lambda _final: str(taken))
    block = memoryview(bytearray(l2_blocks.PAGE))
    with pytest.raises(FileExistsError):
        l2_blocks.store_block(final, "chunk", block, 0)
    assert taken.read_bytes() == b"another writer's bytes" and not os.path.exists(final)


def _short_chunk(tmp_path: Path, age_s: float) -> str:
    """A stored chunk cut to half, last modified `age_s` ago."""
    [path] = store(tmp_path, names(1), cpu_tier(1), 0)
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[: len(data) // 2])
    when = os.stat(path).st_mtime - age_s
    os.utime(path, (when, when))
    return path


def test_a_short_chunk_just_written_is_a_miss_but_kept_for_its_writers_release(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Curvine completes a renamed chunk when the writer's handle is released, after close() returned: a
    reader in between sees it short (docs/curvine-fuse.md). Removing it then would lose a good chunk."""
    path = _short_chunk(tmp_path, age_s=1)
    rejections = l2_integrity.Rejections()
    with caplog.at_level(logging.WARNING, logger="kvtier.l2"), pytest.raises(OSError):
        l2_native.load_blocks(str(tmp_path), [path], cpu_tier(1), [0], BLOCK, 0, rejections)
    assert rejections.counts == {l2_integrity.SHORT: 1}
    assert Path(path).exists()
    assert "served as a miss and kept" in caplog.text


@pytest.mark.parametrize("age_s", [l2_integrity.SETTLING_S + 5, -(l2_integrity.SETTLING_S + 5)])
def test_a_short_chunk_older_than_the_settling_time_is_removed(tmp_path: Path, age_s: float) -> None:
    path = _short_chunk(tmp_path, age_s=age_s)
    rejections = l2_integrity.Rejections()
    with pytest.raises(OSError):
        l2_native.load_blocks(str(tmp_path), [path], cpu_tier(1), [0], BLOCK, 0, rejections)
    assert rejections.counts == {l2_integrity.SHORT: 1}
    assert not Path(path).exists()


def test_a_changed_chunk_just_written_is_removed_at_once(tmp_path: Path) -> None:
    [path] = store(tmp_path, names(1), cpu_tier(1), 0)
    data = bytearray(Path(path).read_bytes())
    data[7] ^= 1
    Path(path).write_bytes(bytes(data))
    with pytest.raises(OSError):
        l2_native.load_blocks(str(tmp_path), [path], cpu_tier(1), [0], BLOCK, 0, l2_integrity.Rejections())
    assert not Path(path).exists()
