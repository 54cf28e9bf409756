"""`kvtier package`: build dependencies, package every chart at its Chart.yaml version, push to OCI.

Order of work, so that a refusal leaves the registry untouched:
1. release checks of every chart (semver, CHANGELOG section, Artifact Hub annotations);
2. `helm dependency update` + `helm package` of a copy of charts/ (the checkout is not modified), with
   --sign: the `artifacthub.io/signKey` annotation in the copy and a `.prov` beside each package;
3. login (only when credentials are given; into a throwaway registry config unless one is named);
4. a look-up of every chart:version in the registry: an existing version is never overwritten;
5. `helm push` of every package (skipped by --dry-run).
"""

from __future__ import annotations

import difflib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from kvtier import paths, toolchain
from kvtier.errors import UserError
from kvtier.publish.changelog import release_findings
from kvtier.publish.registry import Registry, tag
from kvtier.publish.signing import Signer, annotate
from kvtier.publish.versioning import Finding, chart_meta, version_line


@dataclass
class Outcome:
    chart: str
    version: str
    package: Path
    reference: str = ""  # oci://host/path/chart:tag
    action: str = "packaged"  # packaged | would push | pushed | exists
    digest: str = ""
    signed_by: str = ""  # fingerprint of the key that signed the .prov beside the package


def discover(names: list[str] | None = None, charts_dir: Path | None = None) -> list[Path]:
    """Chart directories (all, or the named ones), each after the local charts it depends on."""
    root = charts_dir or paths.CHARTS
    available = {p.name: p for p in sorted(root.iterdir()) if (p / "Chart.yaml").is_file()}
    unknown = sorted(set(names or []) - set(available))
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(available), n=1)
        hint = f"did you mean {close[0]}?" if close else f"charts: {', '.join(available)}"
        raise UserError(f"no chart named {', '.join(unknown)} in {root}; {hint}")
    chosen = [available[n] for n in (names or available)]
    ordered: list[Path] = []

    def visit(chart: Path, trail: tuple[str, ...]) -> None:
        if chart in ordered or chart.name in trail:
            return
        for dep in chart_meta(chart).get("dependencies") or []:
            repo = str(dep.get("repository", ""))
            local = (chart / repo.removeprefix("file://")).resolve() if repo.startswith("file://") else None
            if (
                local
                and local.parent == root.resolve()
                and local.name in available
                and local.name in (names or available)
            ):
                visit(available[local.name], (*trail, chart.name))
        ordered.append(chart)

    for chart in chosen:
        visit(chart, ())
    return ordered


def check(charts: list[Path]) -> list[Finding]:
    return [finding for chart in charts for finding in release_findings(chart)]


def _helm(args: list[str], major: int, signing: Signer | None = None) -> None:
    # A passphrase goes on stdin (`--passphrase-file -`); without one stdin is closed, so a Helm
    # that wanted to prompt fails instead of waiting.
    result = subprocess.run(
        [str(toolchain.helm(major)), *args, *(signing.helm_flags() if signing else [])],
        input=signing.passphrase if signing and signing.passphrase is not None else None,
        stdin=subprocess.DEVNULL if signing and signing.passphrase is None else None,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if result.returncode != 0:
        message = (result.stderr or result.stdout).strip()
        if signing:
            raise signing.explain(Path(args[1]).name, message.removeprefix("Error: "))
        raise UserError(f"`helm {' '.join(args)}` failed: {message}")


def build(charts: list[Path], dest: Path, *, major: int = 3, signing: Signer | None = None) -> list[Path]:
    """Package (and with `signing`, sign) each chart, dependencies built first, into dest; returns the
    .tgz paths. Nothing lands in dest unless every chart packaged (and signed)."""
    dest.mkdir(parents=True, exist_ok=True)
    packages = []
    with tempfile.TemporaryDirectory(prefix="kvtier-package-") as tmp:
        # Work on a copy: file:// dependencies resolve against siblings, and the checkout stays clean.
        copy = Path(tmp) / "charts"
        staging = Path(tmp) / "packages"
        shutil.copytree(
            charts[0].parent, copy, ignore=shutil.ignore_patterns("*.tgz", "Chart.lock"), symlinks=True
        )
        for chart in charts:
            work = copy / chart.name
            if signing:
                annotate(work / "Chart.yaml", signing)
            if chart_meta(work).get("dependencies"):
                _helm(["dependency", "update", str(work), "--skip-refresh"], major)
            _helm(["package", str(work), "--destination", str(staging)], major, signing)
            meta = chart_meta(work)
            packages.append(f"{meta['name']}-{meta['version']}.tgz")
        for name in packages:
            # `helm push` uploads <package>.prov when it exists: never leave an old one beside a new package.
            (dest / f"{name}.prov").unlink(missing_ok=True)
            for made in (staging / name, staging / f"{name}.prov"):
                if made.exists():
                    shutil.move(made, dest / made.name)
    return [dest / name for name in packages]


@contextmanager
def session(
    registry: Registry, username: str | None, password: str | None, *, dry_run: bool
) -> Iterator[Registry]:
    """The registry to use, logged in when credentials are given.

    Credentials go into a throwaway registry config unless the user named one (and never into a
    named one on --dry-run), so a publish from CI leaves no secret on disk.
    """
    if not username:
        yield registry
        return
    if password is None:
        raise UserError(
            "a username was given without a password; pass --password-stdin or set KVTIER_REGISTRY_PASSWORD"
        )
    with tempfile.TemporaryDirectory(prefix="kvtier-registry-") as tmp:
        if registry.registry_config is None or dry_run:
            registry = replace(registry, registry_config=Path(tmp) / "config.json")
        registry.login(username, password)
        yield registry


def publish(
    charts: list[Path],
    registry: Registry | None,
    dest: Path,
    *,
    dry_run: bool = False,
    username: str | None = None,
    password: str | None = None,
    signing: Signer | None = None,
    helm_major: int = 3,  # without a registry (a --dry-run that only packages); else the registry's
) -> tuple[list[Outcome], list[Finding]]:
    """Package and push; findings (release rules, versions already published) mean nothing was pushed."""
    if registry is None and not dry_run:
        raise UserError("no registry given: pass --registry oci://HOST/PATH or set KVTIER_REGISTRY")
    findings = check(charts)
    if findings:
        return [], findings
    packages = build(charts, dest, major=registry.helm_major if registry else helm_major, signing=signing)
    outcomes = [
        Outcome(
            str(chart_meta(c)["name"]),
            str(chart_meta(c)["version"]),
            p,
            signed_by=signing.fingerprint if signing else "",
        )
        for c, p in zip(charts, packages, strict=True)
    ]
    if registry is None:
        return outcomes, []
    with session(registry, username, password, dry_run=dry_run) as reg:
        for chart, outcome in zip(charts, outcomes, strict=True):
            outcome.reference = f"{reg.ref(outcome.chart)}:{tag(outcome.version)}"
            if reg.exists(outcome.chart, outcome.version):
                outcome.action = "exists"
                findings.append(
                    Finding(
                        "version-published",
                        chart / "Chart.yaml",
                        version_line(chart),
                        f"{outcome.reference} is already in the registry and is never overwritten",
                    )
                )
        if findings or dry_run:
            for outcome in outcomes:
                outcome.action = (
                    "exists" if outcome.action == "exists" else ("would push" if dry_run else "not pushed")
                )
            return outcomes, findings
        for outcome in outcomes:
            outcome.digest = reg.push(outcome.package)
            outcome.action = "pushed"
    return outcomes, findings
