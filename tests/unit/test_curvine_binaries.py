"""Where the Curvine binaries come from and how they are checked (kvtier.cluster.realnode.curvine_binaries).

Archives made here with tar, checksums written by coreutils' sha256sum (the oracle for the format and
the sums); the module must accept exactly what sha256sum wrote and refuse a file whose bytes differ.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from kvtier.cluster.common import binaries
from kvtier.cluster.realnode import curvine_binaries
from kvtier.errors import UserError


def _folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, need) -> Path:
    """$KVTIER_CURVINE_BIN with both archives (small stand-in programs) and one SHA256SUMS from sha256sum."""
    need(shutil.which("sha256sum") is not None and shutil.which("tar") is not None, "sha256sum and tar")
    folder, members = tmp_path / "bins", tmp_path / "members"
    folder.mkdir()
    members.mkdir()
    for archive, (_, names) in curvine_binaries.ARCHIVES.items():
        for name in names:
            (members / name).write_text(f"#!/bin/sh\necho {name}\n")
        subprocess.run(["tar", "-cJf", str(folder / archive), "-C", str(members), *names], check=True)
    every = [name for _, listed in curvine_binaries.ARCHIVES.values() for name in listed]
    # One SHA256SUMS for the archives and the binaries in them, as documented for $KVTIER_CURVINE_BIN.
    archive_sums = subprocess.run(
        ["sha256sum", *curvine_binaries.ARCHIVES], cwd=folder, capture_output=True, text=True, check=True
    )
    binary_sums = subprocess.run(
        ["sha256sum", *every], cwd=members, capture_output=True, text=True, check=True
    )
    (folder / "SHA256SUMS").write_text(archive_sums.stdout + binary_sums.stdout)
    monkeypatch.setenv(curvine_binaries.BIN_ENV, str(folder))
    monkeypatch.setenv("KVTIER_CACHE", str(tmp_path / "cache"))
    return folder


def test_verified_binaries_are_the_archived_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, need
) -> None:
    folder = _folder(tmp_path, monkeypatch, need)
    found = curvine_binaries.verified()
    listed = dict(line.split()[::-1] for line in (folder / "SHA256SUMS").read_text().splitlines())
    assert set(found.paths) == {n for _, names in curvine_binaries.ARCHIVES.values() for n in names}
    for name, path in found.paths.items():
        assert path.is_relative_to(binaries.cache_dir())
        assert path.read_text() == f"#!/bin/sh\necho {name}\n"
        assert (
            subprocess.run(["sha256sum", str(path)], capture_output=True, text=True).stdout.split()[0]
            == (listed[name])
        )
        assert found.sha256[name] == listed[name]


def test_an_archive_with_a_wrong_checksum_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, need
) -> None:
    folder = _folder(tmp_path, monkeypatch, need)
    archive = folder / curvine_binaries.SIDECARS_ARCHIVE
    archive.write_bytes(archive.read_bytes() + b"\0")
    with pytest.raises(
        UserError, match=r"checksum mismatch: .*csi-sidecars-linux-amd64\.tar\.xz has sha256"
    ) as err:
        curvine_binaries.verified()
    assert str(folder / "SHA256SUMS") in str(err.value)


def test_a_binary_with_a_wrong_checksum_is_refused_even_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, need
) -> None:
    _folder(tmp_path, monkeypatch, need)
    cached = curvine_binaries.verified().paths["curvine-server"]
    cached.write_text("#!/bin/sh\necho something else\n")
    with pytest.raises(UserError, match=rf"checksum mismatch: {cached} has sha256"):
        curvine_binaries.verified()


def test_an_archive_holding_a_tampered_binary_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, need
) -> None:
    """The archive's own sum is made to match (re-listed), the binary inside is not the listed one."""
    folder = _folder(tmp_path, monkeypatch, need)
    archive = folder / curvine_binaries.CURVINE_ARCHIVE
    other = tmp_path / "other"
    other.mkdir()
    with tarfile.open(archive) as tar:
        tar.extractall(other, filter="data")
    (other / "csi").write_text("#!/bin/sh\necho tampered\n")
    names = curvine_binaries.ARCHIVES[curvine_binaries.CURVINE_ARCHIVE][1]
    subprocess.run(["tar", "-cJf", str(archive), "-C", str(other), *names], check=True)
    new_sum = subprocess.run(
        ["sha256sum", archive.name], cwd=folder, capture_output=True, text=True, check=True
    )
    lines = [
        line for line in (folder / "SHA256SUMS").read_text().splitlines() if not line.endswith(archive.name)
    ]
    (folder / "SHA256SUMS").write_text("\n".join([*lines, new_sum.stdout.strip()]) + "\n")
    with pytest.raises(UserError, match=r"checksum mismatch: .*/csi has sha256"):
        curvine_binaries.verified()


def test_a_malformed_sums_line_names_file_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, need
) -> None:
    folder = _folder(tmp_path, monkeypatch, need)
    with (folder / "SHA256SUMS").open("a") as sums:
        sums.write("not-a-sum  csi\n")
    with pytest.raises(UserError, match=rf"{folder / 'SHA256SUMS'}:10: not a sha256sum line"):
        curvine_binaries.verified()


def test_without_the_archives_the_reason_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(curvine_binaries.BIN_ENV, str(tmp_path))
    reason = curvine_binaries.missing()
    assert "\n" not in reason
    assert f"{curvine_binaries.BIN_ENV}={tmp_path}" in reason
    assert curvine_binaries.CURVINE_ARCHIVE in reason and curvine_binaries.SIDECARS_ARCHIVE in reason
    with pytest.raises(UserError, match=curvine_binaries.BIN_ENV):
        curvine_binaries.verified()
