"""Where the Curvine and CSI-sidecar binaries come from, and the proof that they are the expected ones.

No registry here serves Curvine's images or the CSI sidecars the chart pins, so their images are built
from binaries compiled from the upstream tags (curvine_images). Those binaries come as two archives:

- `curvine-v0.4.1-linux-amd64.tar.xz`: curvine-server, curvine-fuse, curvine-cli, csi;
- `csi-sidecars-linux-amd64.tar.xz`: csi-provisioner, csi-node-driver-registrar, livenessprobe;

each with a `SHA256SUMS` (sha256sum's format) listing the archive and every binary in it.

They are looked up in `$KVTIER_CURVINE_BIN`, one folder holding both archives and one SHA256SUMS that
lists all nine files (the two shipped SHA256SUMS concatenated); else in `../shared/curvine` and
`../shared/csi-sidecars` beside the checkout, each archive with its own SHA256SUMS. Nothing is
downloaded. Each archive is checked against SHA256SUMS before it is opened and each unpacked binary
before it is used; a mismatch is an error naming the file. The unpacked binaries are cached by the
archive's checksum in $KVTIER_CACHE/curvine-bin/.
"""

from __future__ import annotations

import os
import re
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kvtier import paths
from kvtier.cluster.common import binaries
from kvtier.cluster.realnode import images
from kvtier.errors import UserError

BIN_ENV = "KVTIER_CURVINE_BIN"
SUMS = "SHA256SUMS"
CURVINE_ARCHIVE = "curvine-v0.4.1-linux-amd64.tar.xz"
SIDECARS_ARCHIVE = "csi-sidecars-linux-amd64.tar.xz"
# archive -> its folder under ../shared (used when KVTIER_CURVINE_BIN is unset), the binaries at its root
ARCHIVES: dict[str, tuple[str, tuple[str, ...]]] = {
    CURVINE_ARCHIVE: ("curvine", ("curvine-server", "curvine-fuse", "curvine-cli", "csi")),
    SIDECARS_ARCHIVE: ("csi-sidecars", ("csi-provisioner", "csi-node-driver-registrar", "livenessprobe")),
}
SUM_LINE = re.compile(r"^([0-9a-f]{64}) [ *](\S+)$")


@dataclass(frozen=True)
class Verified:
    """Every binary, unpacked and checked: name -> path, name -> sha256."""

    paths: dict[str, Path]
    sha256: dict[str, str]


def shared_folders() -> list[Path]:
    """The default places: ../shared/<folder> beside the checkout."""
    return [paths.ROOT.parent / "shared" / folder for folder, _ in ARCHIVES.values()]


def folders() -> list[Path]:
    """Where the archives are looked up: $KVTIER_CURVINE_BIN alone when set, else the shared folders."""
    chosen = os.environ.get(BIN_ENV)
    return [Path(chosen)] if chosen else shared_folders()


def missing() -> str:
    """Why the binaries cannot be used here (empty: they can), in one line naming KVTIER_CURVINE_BIN."""
    places = folders()
    absent = [name for name in ARCHIVES if not any((folder / name).is_file() for folder in places)]
    if not absent:
        return ""
    where = f"${BIN_ENV}={places[0]}" if os.environ.get(BIN_ENV) else " or ".join(map(str, places))
    return (
        f"Curvine binaries not found: no {' or '.join(absent)} in {where}; set {BIN_ENV} to a folder "
        f"holding both archives and one {SUMS} listing them and their binaries"
    )


def read_sums(files: list[Path]) -> dict[str, tuple[str, Path]]:
    """name -> (sha256, the SHA256SUMS that says so); a malformed line or a name listed twice with
    different sums is an error naming the file and line."""
    sums: dict[str, tuple[str, Path]] = {}
    for file in files:
        for number, line in enumerate(file.read_text().splitlines(), 1):
            if not line.strip():
                continue
            match = SUM_LINE.match(line.strip())
            if not match:
                raise UserError(
                    f"{file}:{number}: not a sha256sum line ('<64 hex digits>  <file name>'): {line!r}"
                )
            digest, name = match.groups()
            if name in sums and sums[name][0] != digest:
                raise UserError(f"{file}:{number}: {name} is listed with another sha256 in {sums[name][1]}")
            sums[name] = (digest, file)
    return sums


def check(path: Path, name: str, sums: dict[str, tuple[str, Path]]) -> str:
    """The file's sha256 when SHA256SUMS lists `name` with it; else an error naming both files."""
    if name not in sums:
        raise UserError(
            f"{name} is not listed in {SUMS} ({', '.join(sorted({str(f) for _, f in sums.values()}))})"
        )
    expected, listed_in = sums[name]
    actual = images.file_digest(path)
    if actual != expected:
        raise UserError(
            f"checksum mismatch: {path} has sha256 {actual}, but {listed_in} expects {expected}. "
            f"Replace {path.name} with the file built from the upstream tag (or point {BIN_ENV} at a "
            "folder holding the right one); it is not used as it is."
        )
    return actual


def verified() -> Verified:
    """Every binary of both archives, unpacked into the cache and checked against SHA256SUMS."""
    reason = missing()
    if reason:
        raise UserError(reason)
    places = folders()
    sums = read_sums([folder / SUMS for folder in places if (folder / SUMS).is_file()])
    found: dict[str, Path] = {}
    digests: dict[str, str] = {}
    for archive_name, (_, members) in ARCHIVES.items():
        archive = next(folder / archive_name for folder in places if (folder / archive_name).is_file())
        archive_digest = check(archive, archive_name, sums)
        target = binaries.cache_dir() / "curvine-bin" / archive_digest[:16]
        if not all((target / member).is_file() for member in members):
            _unpack(archive, members, target)
        for member in members:
            # Checked at every use, not only after unpacking: the cache is writable by anyone who is root.
            digests[member] = check(target / member, member, sums)
            found[member] = target / member
    return Verified(found, digests)


def _unpack(archive: Path, members: tuple[str, ...], target: Path) -> None:
    """Copy exactly `members` (regular files at the archive's root) out of it; nothing else is written.
    Unpacked into a scratch folder beside `target` and renamed, so a half-unpacked set is never used."""
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=target.parent, prefix=".unpacking-"))
    try:
        with tarfile.open(archive, "r:xz") as tar:
            for member in members:
                try:
                    info = tar.getmember(member)
                except KeyError:
                    expected = ", ".join(members)
                    raise UserError(f"{archive} has no {member} at its root (expected: {expected})") from None
                source = tar.extractfile(info) if info.isfile() else None
                if source is None:
                    raise UserError(f"{archive}: {member} is not a regular file")
                with (scratch / member).open("wb") as stream:
                    shutil.copyfileobj(source, stream, 1 << 20)
                (scratch / member).chmod(0o755)
        shutil.rmtree(target, ignore_errors=True)
        scratch.rename(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
