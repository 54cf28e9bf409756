"""Running the pinned Helm: one place that knows how to call it and how to prepare a chart."""

from __future__ import annotations

import subprocess
from pathlib import Path

from kvtier import toolchain

PINNED_MAJORS = (3, 4)  # the Helms toolchain/versions.env pins


def run(
    args: list[str], *, major: int = 3, check: bool = False, timeout: int = 300
) -> subprocess.CompletedProcess[str]:
    """`helm <args>` with the pinned Helm of that major version; output captured as text."""
    binary = toolchain.helm(major, allow_override=False)
    return subprocess.run([str(binary), *args], capture_output=True, text=True, check=check, timeout=timeout)


def dependencies_current(chart: Path) -> bool:
    """Whether every file:// dependency of a chart is packaged in its charts/, once, at the version
    Chart.yaml asks for, and newer than its source."""
    import yaml

    meta = yaml.safe_load((chart / "Chart.yaml").read_text()) or {}
    for dep in meta.get("dependencies") or []:
        repo = dep.get("repository", "")
        if not repo.startswith("file://"):
            continue
        source = (chart / repo.removeprefix("file://")).resolve()
        packaged = sorted((chart / "charts").glob(f"{dep['name']}-*.tgz"))
        if len(packaged) != 1 or packaged[0].name != f"{dep['name']}-{dep.get('version')}.tgz":
            return False  # missing, an older version left beside it (Helm would load both), or a bump
        newest_source = max(p.stat().st_mtime for p in source.rglob("*") if p.is_file())
        if packaged[0].stat().st_mtime < newest_source:
            return False
    return True


def build_dependencies(chart: Path, *, major: int = 3) -> None:
    """Package the file:// dependencies when one is missing, stale or of another version. `dependency
    update` (not `build`): after a version bump the Chart.lock of an earlier build is out of sync, which
    `build` refuses; update rewrites it and replaces the old package."""
    if not dependencies_current(chart):
        run(["dependency", "update", str(chart), "--skip-refresh"], major=major, check=True)


def majors(option: str) -> tuple[int, ...]:
    """Helm major versions from a `--helm 3,4` option; a UserError for anything else."""
    from kvtier.errors import UserError

    try:
        chosen = tuple(int(m) for m in option.split(",") if m.strip())
    except ValueError:
        chosen = ()
    if not chosen or not set(chosen) <= set(PINNED_MAJORS):
        raise UserError(f"--helm {option!r}: expected pinned Helm majors like 3 or 3,4") from None
    return chosen
