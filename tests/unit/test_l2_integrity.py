"""Sealed L2 chunk files (podscripts/l2_integrity.py, l2_connector.py) on real files: whatever changes in a
file after it was written, a read refuses it instead of returning its bytes. With LMCache's own loader and
engines, tests/engine/test_l2_failures.py and test_l2_tiers.py check the same on the real read path.

The oracle for the format is BLAKE3 computed here from the layout the module docstring states, so a
change of format shows up here and not only as a self-consistent round trip.
"""

from __future__ import annotations

import ctypes
import struct
from pathlib import Path

import blake3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvtier.podscripts import l2_connector, l2_integrity

HEADER_BYTES = 28  # LMCache's chunk header; its first field is the KV length ("<i")
KEY = "tiny-llama@1@0@1f2e3d@bfloat16"


class Buffer:
    """A stand-in for LMCache's MemoryObj: the bytes it reads into and its reference count."""

    def __init__(self, size: int) -> None:
        self.byte_array = bytearray(size)
        self.released = False

    def ref_count_down(self) -> None:
        self.released = True


def header_for(payload: bytes) -> bytes:
    return struct.pack("<i", len(payload)) + bytes(range(HEADER_BYTES - 4))


def declared(header: bytes) -> int:
    (length,) = struct.unpack_from("<i", header)
    if length < 0:
        raise ValueError("negative length")
    return length


def read(path: Path, key: str = KEY) -> tuple[bytes | None, str | None, list[Buffer]]:
    made: list[Buffer] = []

    def allocate(header: bytes) -> Buffer:
        made.append(Buffer(declared(header)))
        return made[-1]

    obj, why = l2_connector.read_sealed(path, key, HEADER_BYTES, declared, allocate)
    return (bytes(obj.byte_array) if obj is not None else None), why, made


def sealed(tmp_path: Path, payload: bytes, key: str = KEY) -> Path:
    final = tmp_path / "chunk.data"
    l2_connector.write_sealed(final, tmp_path / "chunk.tmp", key, header_for(payload), payload)
    return final


def test_the_trailer_is_magic_and_blake3_of_key_header_and_kv(tmp_path: Path) -> None:
    payload = bytes(range(256)) * 40
    path = sealed(tmp_path, payload)
    data = path.read_bytes()
    name = KEY.encode()
    expected = blake3.blake3(len(name).to_bytes(4, "little") + name + header_for(payload) + payload)
    assert data == header_for(payload) + payload + b"kvtsum\x00\x01" + expected.digest(length=16)
    assert not (tmp_path / "chunk.tmp").exists()
    got, why, made = read(path)
    assert (got, why) == (payload, None) and not made[0].released  # the caller owns the buffer now


def test_lmcache_s_byte_array_is_sealed_as_its_bytes(tmp_path: Path) -> None:
    # LMCache hands the connector a memoryview of a ctypes ubyte array (format "<B", not "B"); the first
    # rig run refused it ("buffer contents are not compatible with u8") and stored nothing.
    data = bytes(range(200)) * 5
    view = memoryview((ctypes.c_ubyte * len(data)).from_buffer_copy(data))
    assert view.format == "<B"
    final = tmp_path / "view.data"
    l2_connector.write_sealed(final, tmp_path / "view.tmp", KEY, header_for(data), view)
    assert final.read_bytes() == sealed(tmp_path, data).read_bytes()  # the same seal as of plain bytes
    assert read(final)[:2] == (data, None)


def test_lmcache_reads_a_sealed_file_unchanged(tmp_path: Path) -> None:
    # LMCache's reader takes the header's length of KV and stops there: the trailer is past what it reads.
    payload = b"\x07" * 1000
    data = sealed(tmp_path, payload).read_bytes()
    length = declared(data[:HEADER_BYTES])
    assert data[HEADER_BYTES : HEADER_BYTES + length] == payload


@settings(max_examples=200, deadline=None)
@given(payload=st.binary(min_size=1, max_size=3000), where=st.integers(min_value=0), xor=st.integers(1, 255))
def test_any_changed_byte_is_refused_and_its_buffer_released(
    tmp_path_factory: pytest.TempPathFactory, payload: bytes, where: int, xor: int
) -> None:
    path = sealed(tmp_path_factory.mktemp("flip"), payload)
    data = bytearray(path.read_bytes())
    data[where % len(data)] ^= xor
    path.write_bytes(bytes(data))
    got, why, made = read(path)
    assert got is None and why in (l2_integrity.MISMATCH, l2_integrity.SHORT, l2_integrity.UNSEALED)
    assert all(buffer.released for buffer in made)


@settings(max_examples=100, deadline=None)
@given(
    payload=st.binary(min_size=1, max_size=3000), keep=st.integers(min_value=0), extra=st.binary(max_size=40)
)
def test_a_cut_or_grown_file_is_refused(
    tmp_path_factory: pytest.TempPathFactory, payload: bytes, keep: int, extra: bytes
) -> None:
    path = sealed(tmp_path_factory.mktemp("cut"), payload)
    data = path.read_bytes()
    changed = data[: keep % len(data)] if not extra else data + extra
    path.write_bytes(changed)
    got, why, made = read(path)
    assert got is None and why is not None, (len(data), len(changed), why)
    assert all(buffer.released for buffer in made)


def test_a_cut_trailer_is_short_and_a_grown_file_a_mismatch(tmp_path: Path) -> None:
    path = sealed(tmp_path, b"kv" * 100)
    data = path.read_bytes()
    path.write_bytes(data[:-5])
    assert read(path)[:2] == (None, l2_integrity.SHORT)
    path.write_bytes(data + b"x")
    assert read(path)[:2] == (None, l2_integrity.MISMATCH)


def test_a_file_written_without_integrity_is_unsealed(tmp_path: Path) -> None:
    path = tmp_path / "legacy.data"
    path.write_bytes(header_for(b"kv" * 100) + b"kv" * 100)  # what LMCache's own fs connector writes
    assert read(path)[:2] == (None, l2_integrity.UNSEALED)


def test_a_sealed_file_under_another_key_is_refused(tmp_path: Path) -> None:
    path = sealed(tmp_path, b"kv" * 100)
    assert read(path, key=KEY.replace("1f2e3d", "000000"))[:2] == (None, l2_integrity.MISMATCH)


def test_a_failed_write_leaves_neither_file(tmp_path: Path) -> None:
    final, temp = tmp_path / "chunk.data", tmp_path / "missing-dir" / "chunk.tmp"
    with pytest.raises(FileNotFoundError):
        l2_connector.write_sealed(final, temp, KEY, header_for(b"x"), b"x")
    assert not final.exists() and not temp.exists()


@pytest.mark.parametrize(
    ("value", "on"), [(True, True), (False, False), ("true", True), ("false", False), (1, True)]
)
def test_the_verify_option_reads_yaml_and_strings_alike(value: object, on: bool) -> None:
    assert l2_connector._flag(value) is on


def test_the_connector_class_is_built_on_first_access() -> None:
    """The module imports without LMCache (the toolkit, the eviction image); the class needs LMCache."""
    with pytest.raises(AttributeError, match="no attribute"):
        l2_connector.NotThere  # noqa: B018
    try:
        from lmcache.v1.storage_backend.connector.fs_connector import FSConnector
    except ImportError:
        with pytest.raises(ImportError):
            l2_connector.KvtierFSConnector  # noqa: B018
        return
    assert issubclass(l2_connector.KvtierFSConnector, FSConnector)


def test_two_writers_of_one_chunk_never_share_a_temp_file(tmp_path: Path) -> None:
    """LMCache names one temp path per key (`<key>.tmp`): a write in flight there (another pod's) is neither
    written into nor removed by a second writer of the same chunk, whose own temp keeps the `.tmp` suffix
    the eviction and warm-up scans skip."""
    final, shared_temp = tmp_path / "chunk.data", tmp_path / "chunk.tmp"
    shared_temp.write_bytes(b"another writer's bytes")
    names = {l2_connector.own_temp(shared_temp) for _ in range(50)}
    assert len(names) == 50 and all(n.suffix == ".tmp" and n.parent == tmp_path for n in names)
    l2_connector.write_sealed(final, shared_temp, KEY, header_for(b"kv"), b"kv")
    assert shared_temp.read_bytes() == b"another writer's bytes"
    assert read(final)[1] is None  # verified
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chunk.data", "chunk.tmp"]
