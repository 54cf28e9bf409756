"""Where the Curvine and CSI-sidecar binaries come from, and the proof that they are the expected ones.

No registry here serves Curvine's images or the CSI sidecars the chart pins, so their images are built
from binaries compiled from the upstream tags (curvine_images). Those binaries come as two archives:

- `curvine-v0.4.1-linux-amd64.tar.xz`: curvine-server, curvine-fuse, curvine-cli, csi;
- `csi-sidecars-linux-amd64.tar.xz`: csi-provisioner, csi-node-driver-registrar, livenessprobe.

They are looked up in `$KVTIER_CURVINE_BIN` (one folder holding both archives), else in `../shared/curvine`
and `../shared/csi-sidecars` beside the checkout. Nothing is downloaded.

The expected sha256 of both archives and of the seven binaries is pinned in the repository, in
`toolchain/curvine-binaries.sha256` (sha256sum's format, with where each digest came from), beside the
tool versions. Each archive is checked against the pin before anything is unpacked from it, and each
unpacked binary at every use (the cache is writable by anyone who is root). The `SHA256SUMS` shipped
beside the archives is not read: it proves that the files agree with each other, not where they came
from, since whoever can replace an archive can replace its SHA256SUMS too; the pin changes only in a
reviewed commit. A mismatch is an error naming the file, both digests, the pin file and the fix. The
unpacked binaries are cached by the archive's pinned digest in $KVTIER_CACHE/curvine-bin/.
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
PIN_FILE = paths.ROOT / "toolchain" / "curvine-binaries.sha256"
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
        f"holding both archives (their sha256 are pinned in {_shown(PIN_FILE)})"
    )


def _shown(path: Path) -> str:
    """A path as a reader finds it: relative to the checkout when it is inside it."""
    return str(path.relative_to(paths.ROOT)) if path.is_relative_to(paths.ROOT) else str(path)


def pinned() -> dict[str, str]:
    """name -> sha256 as the pin file says, for both archives and every binary in them; a missing or
    malformed pin file, or one that leaves a file out, is an error naming it."""
    try:
        text = PIN_FILE.read_text()
    except OSError as error:
        raise UserError(
            f"{PIN_FILE}: the pinned sha256 of the Curvine binaries cannot be read ({error.strerror}); "
            "restore it from git (git checkout -- toolchain/curvine-binaries.sha256)"
        ) from None
    pins: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        match = SUM_LINE.match(line.strip())
        if not match:
            raise UserError(
                f"{PIN_FILE}:{number}: not a sha256sum line ('<64 hex digits>  <file name>'): {line!r}"
            )
        digest, name = match.groups()
        if name in pins and pins[name] != digest:
            raise UserError(f"{PIN_FILE}:{number}: {name} is pinned twice, with different sha256")
        pins[name] = digest
    wanted = [name for archive, (_, members) in ARCHIVES.items() for name in (archive, *members)]
    unpinned = [name for name in wanted if name not in pins]
    if unpinned:
        raise UserError(
            f"{PIN_FILE} pins no sha256 for {', '.join(unpinned)}; add a '<sha256>  <name>' line for each "
            "(sha256sum of the file built from its upstream tag)"
        )
    return pins


def check(path: Path, name: str, pins: dict[str, str]) -> str:
    """The file's sha256 when it is the one pinned for `name`; else an error naming the file, both
    digests, the pin file and the fix."""
    expected = pins[name]
    actual = images.file_digest(path)
    if actual != expected:
        raise UserError(
            f"checksum mismatch: {path} has sha256 {actual}, but {_shown(PIN_FILE)} pins {name} at "
            f"{expected}. It is not used. Replace {path.name} with the file built from its upstream tag "
            f"(../shared/*/README.md; or point {BIN_ENV} at a folder holding it); if it was rebuilt on "
            f"purpose, pin the new digests in {_shown(PIN_FILE)} in a reviewed commit, saying how it was "
            "built."
        )
    return actual


def verified() -> Verified:
    """Every binary of both archives, each archive checked against the pin before it is unpacked into the
    cache, each binary checked against the pin on every call."""
    reason = missing()
    if reason:
        raise UserError(reason)
    pins = pinned()
    places = folders()
    found: dict[str, Path] = {}
    digests: dict[str, str] = {}
    for archive_name, (_, members) in ARCHIVES.items():
        archive = next(folder / archive_name for folder in places if (folder / archive_name).is_file())
        archive_digest = check(archive, archive_name, pins)
        target = binaries.cache_dir() / "curvine-bin" / archive_digest[:16]
        if not all((target / member).is_file() for member in members):
            _unpack(archive, members, target)
        for member in members:
            # Checked at every use, not only after unpacking: the cache is writable by anyone who is root.
            digests[member] = check(target / member, member, pins)
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
