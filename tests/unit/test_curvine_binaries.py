"""Where the Curvine binaries come from and how they are checked (kvtier.cluster.realnode.curvine_binaries).

Archives made here with tar, digests written by coreutils' sha256sum (the oracle for the format and the
sums). The authority is the pin file in the repository (toolchain/curvine-binaries.sha256): the module must
accept exactly the archives and binaries it pins, whatever a SHA256SUMS beside them says, and refuse a file
whose bytes differ, before anything is unpacked from an archive.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from kvtier import paths
from kvtier.cluster.common import binaries
from kvtier.cluster.realnode import curvine_binaries
from kvtier.errors import UserError

REPOSITORY_PIN = paths.ROOT / "toolchain" / "curvine-binaries.sha256"
EVERY = [name for archive, (_, members) in curvine_binaries.ARCHIVES.items() for name in (archive, *members)]


def _sha256sum(folder: Path, names: list[str]) -> str:
    return subprocess.run(
        ["sha256sum", *names], cwd=folder, capture_output=True, text=True, check=True
    ).stdout


def _archives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, need) -> tuple[Path, str]:
    """$KVTIER_CURVINE_BIN with both archives (small stand-in programs); and sha256sum's lines for the
    archives and their members, as a pin file or a SHA256SUMS would hold them."""
    need(shutil.which("sha256sum") is not None and shutil.which("tar") is not None, "sha256sum and tar")
    folder, members = tmp_path / "bins", tmp_path / "members"
    folder.mkdir()
    members.mkdir()
    for archive, (_, names) in curvine_binaries.ARCHIVES.items():
        for name in names:
            (members / name).write_text(f"#!/bin/sh\necho {name}\n")
        subprocess.run(["tar", "-cJf", str(folder / archive), "-C", str(members), *names], check=True)
    every = [name for _, listed in curvine_binaries.ARCHIVES.values() for name in listed]
    sums = _sha256sum(folder, list(curvine_binaries.ARCHIVES)) + _sha256sum(members, every)
    monkeypatch.setenv(curvine_binaries.BIN_ENV, str(folder))
    monkeypatch.setenv("KVTIER_CACHE", str(tmp_path / "cache"))
    return folder, sums


def _pin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: str) -> Path:
    """A pin file of `lines` (with a comment, as the repository's has), in place of the repository's."""
    pin = tmp_path / "curvine-binaries.sha256"
    pin.write_text("# stand-in archives built by the test\n" + lines)
    monkeypatch.setattr(curvine_binaries, "PIN_FILE", pin)
    return pin


def _unpacked(tmp_path: Path) -> list[Path]:
    return list((tmp_path / "cache").rglob("curvine-bin/*/*"))


def test_a_pinned_archive_is_accepted_and_no_sha256sums_is_needed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, need
) -> None:
    folder, sums = _archives(tmp_path, monkeypatch, need)
    _pin(tmp_path, monkeypatch, sums)
    assert not (folder / "SHA256SUMS").exists()
    found = curvine_binaries.verified()
    listed = dict(line.split()[::-1] for line in sums.splitlines())
    assert set(found.paths) == {n for _, names in curvine_binaries.ARCHIVES.values() for n in names}
    for name, path in found.paths.items():
        assert path.is_relative_to(binaries.cache_dir())
        assert path.read_text() == f"#!/bin/sh\necho {name}\n"
        assert _sha256sum(path.parent, [path.name]).split()[0] == listed[name]
        assert found.sha256[name] == listed[name]


def test_an_archive_with_a_matching_forged_sha256sums_is_refused_before_it_is_unpacked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, need
) -> None:
    """Archives swapped together with a SHA256SUMS that agrees with them: the repository's pin decides."""
    folder, sums = _archives(tmp_path, monkeypatch, need)
    (folder / "SHA256SUMS").write_text(sums)
    archive = folder / curvine_binaries.CURVINE_ARCHIVE
    actual = _sha256sum(folder, [archive.name]).split()[0]
    pinned = re.search(rf"^(\w{{64}})  {re.escape(archive.name)}$", REPOSITORY_PIN.read_text(), re.M)
    assert pinned is not None
    with pytest.raises(UserError) as err:
        curvine_binaries.verified()
    message = str(err.value)
    assert f"checksum mismatch: {archive} has sha256 {actual}" in message
    assert f"toolchain/curvine-binaries.sha256 pins {archive.name} at {pinned.group(1)}" in message
    assert "reviewed commit" in message and "Replace" in message
    assert _unpacked(tmp_path) == []


def test_an_archive_changed_after_pinning_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, need
) -> None:
    folder, sums = _archives(tmp_path, monkeypatch, need)
    pin = _pin(tmp_path, monkeypatch, sums)
    archive = folder / curvine_binaries.SIDECARS_ARCHIVE
    archive.write_bytes(archive.read_bytes() + b"\0")
    with pytest.raises(UserError, match=r"checksum mismatch: .*csi-sidecars-linux-amd64\.tar\.xz has sha256"):
        curvine_binaries.verified()
    with pytest.raises(UserError, match=re.escape(str(pin))):
        curvine_binaries.verified()


def test_a_binary_with_a_wrong_checksum_is_refused_even_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, need
) -> None:
    _, sums = _archives(tmp_path, monkeypatch, need)
    _pin(tmp_path, monkeypatch, sums)
    cached = curvine_binaries.verified().paths["curvine-server"]
    cached.write_text("#!/bin/sh\necho something else\n")
    with pytest.raises(UserError, match=rf"checksum mismatch: {cached} has sha256"):
        curvine_binaries.verified()


def test_an_archive_holding_a_tampered_binary_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, need
) -> None:
    """The archive's own pin is made to match (re-pinned), the binary inside is not the pinned one."""
    folder, sums = _archives(tmp_path, monkeypatch, need)
    archive = folder / curvine_binaries.CURVINE_ARCHIVE
    other = tmp_path / "other"
    other.mkdir()
    with tarfile.open(archive) as tar:
        tar.extractall(other, filter="data")
    (other / "csi").write_text("#!/bin/sh\necho tampered\n")
    names = curvine_binaries.ARCHIVES[curvine_binaries.CURVINE_ARCHIVE][1]
    subprocess.run(["tar", "-cJf", str(archive), "-C", str(other), *names], check=True)
    lines = [line for line in sums.splitlines() if not line.endswith(archive.name)]
    _pin(tmp_path, monkeypatch, "\n".join([*lines, _sha256sum(folder, [archive.name]).strip()]) + "\n")
    with pytest.raises(UserError, match=r"checksum mismatch: .*/csi has sha256"):
        curvine_binaries.verified()


def test_a_malformed_pin_line_names_file_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, need
) -> None:
    _, sums = _archives(tmp_path, monkeypatch, need)
    pin = _pin(tmp_path, monkeypatch, sums + "not-a-sum  csi\n")
    with pytest.raises(UserError, match=rf"{re.escape(str(pin))}:11: not a sha256sum line"):
        curvine_binaries.verified()


def test_a_pin_file_that_leaves_a_binary_out_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, need
) -> None:
    _, sums = _archives(tmp_path, monkeypatch, need)
    _pin(
        tmp_path,
        monkeypatch,
        "".join(line + "\n" for line in sums.splitlines() if "livenessprobe" not in line),
    )
    with pytest.raises(UserError, match=r"pins no sha256 for livenessprobe"):
        curvine_binaries.verified()


def test_the_repository_pins_both_archives_and_their_seven_binaries_with_their_source() -> None:
    text = REPOSITORY_PIN.read_text()
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert sorted(line.split("  ")[1] for line in lines) == sorted(EVERY)
    assert all(re.fullmatch(r"[0-9a-f]{64}  \S+", line) for line in lines), lines
    assert "v0.4.1" in text and "709f24781f35a0ea8dda01b12212ede007712498" in text  # where they came from
    assert curvine_binaries.PIN_FILE == REPOSITORY_PIN


@pytest.mark.parametrize("archive", sorted(curvine_binaries.ARCHIVES))
def test_the_shared_archives_are_the_pinned_ones(archive: str, need) -> None:
    folder = paths.ROOT.parent / "shared" / curvine_binaries.ARCHIVES[archive][0]
    need((folder / archive).is_file(), f"{folder / archive} (the shared archives) is not here")
    assert curvine_binaries.check(folder / archive, archive, curvine_binaries.pinned())


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
