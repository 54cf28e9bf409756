"""Bridgecrew's checkov (PyPI `checkov`, kubernetes framework), the policy scanner chart registries and
admission pipelines gate charts with, run over the renders of values/ environments.

checkov pins a large dependency tree of its own, so it lives in .venv-checkov (toolchain/side-venv.sh
checkov, version in toolchain/versions.env) and runs as a subprocess. The charts answer each finding either
with a fix or with checkov's own skip annotation on the object (`checkov.io/skipN: CKV_K8S_XX=<reason>`,
read by checkov/kubernetes/kubernetes_utils.py get_skipped_checks, 3.3.30); docs/security.md lists them.

One checkov process over one folder holding every environment's render (a file each) costs one start-up
(about 3 s of imports) instead of one per environment.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvtier import helm, paths, toolchain
from kvtier.errors import UserError

INSTALL_HINT = "run `make checkov` (toolchain/side-venv.sh checkov)"
TIMEOUT_S = 600
UMBRELLA = paths.CHARTS / "kv-tiered-inference"
# As a user installs an environment (the values files' own example: `helm install kv ... -n inference`).
RELEASE = "kv"
NAMESPACE = "inference"


def binary() -> Path:
    """checkov's entry point: $KVTIER_CHECKOV, else .venv-checkov/bin/checkov."""
    env = os.environ.get("KVTIER_CHECKOV")
    return Path(env) if env else paths.ROOT / ".venv-checkov" / "bin" / "checkov"


def pinned_version() -> str:
    return toolchain.versions().get("CHECKOV_VERSION", "?")


def missing() -> str:
    """Why checkov cannot be run ("" when it can)."""
    if not binary().exists():
        return f"checkov {pinned_version()} is not installed ({binary()} missing): {INSTALL_HINT}"
    return ""


@dataclass(frozen=True)
class Finding:
    """One check checkov failed or skipped on one object of one rendered file."""

    check_id: str
    check_name: str
    kind: str
    namespace: str
    name: str
    file: str  # the rendered file's name (one per environment)
    skipped: bool
    reason: str  # the skip annotation's text after `=`; "" when failed, checkov's placeholder when none given

    @property
    def environment(self) -> str:
        return Path(self.file).stem

    def describe(self) -> str:
        return f"{self.environment}: {self.kind}/{self.name}: {self.check_id} ({self.check_name})"


# checkov's text for a skip annotation without `=<reason>` (kubernetes_utils.get_skipped_checks).
NO_REASON = "No comment provided"


def render_environment(values_file: Path, file: Path, *, major: int = 3, overlay: Sequence[str] = ()) -> None:
    """Write the umbrella's render for one environment, as `helm install kv -n inference -f <values_file>`
    would make it, to `file`: Helm's output as printed (what a registry's scan reads). The subchart is
    packaged first. Raises helm.TemplateError with Helm's message."""
    helm.build_dependencies(UMBRELLA, major=major)
    template = helm.Template(
        UMBRELLA, RELEASE, [values_file], overlay=overlay, namespace=NAMESPACE, major=major
    )
    try:
        done = subprocess.run(
            template.command(), capture_output=True, text=True, timeout=helm.TEMPLATE_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise helm.TemplateError(
            f"{values_file}: helm template took more than {helm.TEMPLATE_TIMEOUT_S} s"
        ) from None
    if done.returncode != 0:
        raise helm.TemplateError(f"{values_file}: {helm.clean_error(done.stderr)}")
    file.write_text(done.stdout)


def scan(folder: Path) -> list[Finding]:
    """checkov's kubernetes checks over every *.yaml file in `folder`: every failed or skipped finding
    (passed ones dropped). A UserError when checkov is missing, fails or prints what it cannot parse."""
    why = missing()
    if why:
        raise UserError(why)
    argv = [str(binary()), "--directory", str(folder), "--framework", "kubernetes", "--output", "json"]
    # --skip-download: nothing from Prisma Cloud (offline); --soft-fail: exit 0 with findings, so a
    # non-zero exit is checkov's own failure.
    argv += ["--skip-download", "--soft-fail"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise UserError(f"checkov ({binary()}) did not finish: {error}; {INSTALL_HINT}") from error
    if done.returncode != 0:
        raise UserError(f"checkov failed (exit {done.returncode}) on {folder}: {done.stderr.strip()[-800:]}")
    return parse(done.stdout, folder)


def parse(text: str, folder: Path) -> list[Finding]:
    """checkov's JSON report -> findings. No resource at all is `[]` or a bare summary."""
    try:
        report = json.loads(text) if text.strip() else []
    except json.JSONDecodeError as error:
        raise UserError(f"checkov printed no JSON report for {folder}: {error}: {text[:300]!r}") from None
    reports = report if isinstance(report, list) else [report]
    findings: list[Finding] = []
    for one in reports:
        if not isinstance(one, dict) or one.get("check_type") != "kubernetes":
            continue
        results = one.get("results", {})
        errors = results.get("parsing_errors") or []
        if errors:
            raise UserError(f"checkov could not parse {', '.join(map(str, errors))}")
        for record in results.get("failed_checks", []):
            findings.append(_finding(record, skipped=False))
        for record in results.get("skipped_checks", []):
            findings.append(_finding(record, skipped=True))
    return findings


def _finding(record: dict[str, Any], *, skipped: bool) -> Finding:
    # checkov's resource id is Kind.namespace.name (namespace "default" where the object names none).
    kind, namespace, name = str(record["resource"]).split(".", 2)
    result = record.get("check_result") or {}
    return Finding(
        check_id=record["check_id"],
        check_name=record.get("check_name") or "",
        kind=kind,
        namespace=namespace,
        name=name,
        file=Path(record.get("file_path", "")).name,
        skipped=skipped,
        reason=str(result.get("suppress_comment", "")).strip() if skipped else "",
    )


def unjustified(findings: Iterable[Finding]) -> list[Finding]:
    """What the gate refuses: a failed check, or a skip without a reason."""
    return [f for f in findings if not f.skipped or not f.reason or f.reason == NO_REASON]


def sources(file: Path) -> dict[tuple[str, str, str], str]:
    """(kind, namespace, name) -> the chart template each object of a written render came from, as a path
    under charts/ (the subchart's `kv-tiered-inference/charts/curvine/...` becomes `curvine/...`)."""
    found: dict[tuple[str, str, str], str] = {}
    rendered = helm.split(file.read_text())
    for doc, source in zip(rendered.manifests, rendered.sources, strict=True):
        meta = doc.get("metadata") or {}
        key = (str(doc.get("kind")), str(meta.get("namespace") or "default"), str(meta.get("name")))
        found[key] = source.split("/charts/", 1)[-1]
    return found
