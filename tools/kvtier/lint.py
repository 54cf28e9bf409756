"""`kvtier lint`: what chart-testing's `ct lint` checks, for every chart, in-process where possible.

Per chart (as ct does, in this order): version bump against the target branch (only for a chart that
changed since the merge base), Chart.yaml against ct's chart schema (yamale), yamllint with ct's lint
config on Chart.yaml, values.yaml and ci/*-values.yaml, then `helm lint` once per CI values file.
ct's own configs are the ones `make tools` copies from its module into .tools/etc/.

The target branch: ct compares with `<remote>/<target-branch>` (ct.yaml: origin/main). A fresh clone
without that remote ref gets a local stand-in, refs/kvtier/base, at the root commit: every chart is then
"new" (linted in full; no earlier version to bump from), which is what a first CI run sees too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from kvtier import helm, paths, toolchain
from kvtier.errors import UserError
from kvtier.publish import versioning

ETC = paths.ROOT / ".tools" / "etc"
CT_CONFIG = paths.ROOT / "ct.yaml"
LOCAL_BASE = ("kvtier", "base")  # remote, branch: `kvtier/base` resolves to refs/kvtier/base


@dataclass
class ChartLint:
    chart: str
    steps: dict[str, str] = field(default_factory=dict)  # step -> "ok" | "skipped: why" | problem text

    @property
    def failed(self) -> bool:
        return any(not (v == "ok" or v.startswith("skipped")) for v in self.steps.values())


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=paths.ROOT, capture_output=True, text=True, timeout=60)


def ct_settings() -> dict[str, object]:
    try:
        data = yaml.safe_load(CT_CONFIG.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise UserError(f"{CT_CONFIG}: cannot read the chart-testing config ({error})") from None
    return data if isinstance(data, dict) else {}


def target_ref() -> tuple[str, str, str]:
    """(remote, branch, note) ct should compare with; creates the local stand-in when needed."""
    settings = ct_settings()
    remote, branch = str(settings.get("remote", "origin")), str(settings.get("target-branch", "main"))
    if _git("rev-parse", "--verify", "--quiet", f"{remote}/{branch}").returncode == 0:
        return remote, branch, f"{remote}/{branch}"
    root = _git("rev-list", "--max-parents=0", "HEAD")
    if root.returncode != 0 or not root.stdout.strip():
        raise UserError(f"{paths.ROOT} is not a git repository with a commit; ct lint needs one")
    first = root.stdout.split()[-1]
    _git("update-ref", f"refs/{LOCAL_BASE[0]}/{LOCAL_BASE[1]}", first)
    return (*LOCAL_BASE, f"no {remote}/{branch}: local stand-in refs/kvtier/base = root commit {first[:12]}")


def charts() -> list[Path]:
    return sorted(p.parent for p in paths.CHARTS.glob("*/Chart.yaml"))


def _version_bump(chart: Path, remote: str, branch: str) -> str:
    """ct's version check, with ct's notion of "changed": any tracked file under the chart that differs
    from the merge base (ct ignores .helmignore unless `use-helmignore`), old version from the target
    branch's tip. `kvtier package` asks a different question (would the packaged chart differ?), hence
    versioning.changed_without_bump; both order versions with versioning.parse_version (python-semver)."""
    rel = chart.relative_to(paths.ROOT)
    base = _git("merge-base", f"{remote}/{branch}", "HEAD").stdout.strip()
    changed = _git("diff", "--name-only", base, "--", str(rel)).stdout.strip() if base else "?"
    if not changed:
        return "skipped: chart unchanged since the target branch"
    old = _git("show", f"{remote}/{branch}:{rel}/Chart.yaml")
    if old.returncode != 0:
        return "skipped: new chart (not on the target branch)"
    try:
        before = versioning.parse_version(str((yaml.safe_load(old.stdout) or {}).get("version")))
        now = versioning.parse_version(str(versioning.chart_meta(chart)["version"]))
    except (yaml.YAMLError, ValueError, UserError) as error:
        return f"cannot compare Chart.yaml versions: {error}"
    if now <= before:
        return f"chart changed but version {now} is not above {before} on {remote}/{branch}: bump it"
    return "ok"


def _yamale(chart_yaml: Path) -> str:
    schema_file = ETC / "chart_schema.yaml"
    if not schema_file.is_file():
        return f"skipped: {schema_file} missing ({toolchain.INSTALL_HINT})"
    try:
        import yamale
    except ImportError:
        return f"yamale is not installed in this Python ({toolchain.INSTALL_HINT})"
    try:
        yamale.validate(yamale.make_schema(str(schema_file)), yamale.make_data(str(chart_yaml)))
    except yamale.YamaleError as error:
        return "; ".join(str(r) for r in error.results)[:500]
    except (yaml.YAMLError, ValueError) as error:
        return f"Chart.yaml is not valid YAML: {error}"
    return "ok"


def _yamllint(files: list[Path]) -> str:
    conf_file = ETC / "lintconf.yaml"
    if not conf_file.is_file():
        return f"skipped: {conf_file} missing ({toolchain.INSTALL_HINT})"
    try:
        from yamllint import linter
        from yamllint.config import YamlLintConfig
    except ImportError:
        return f"yamllint is not installed in this Python ({toolchain.INSTALL_HINT})"

    conf = YamlLintConfig(file=str(conf_file))
    problems = []
    for f in files:
        for p in linter.run(f.read_text(), conf, str(f)):
            if p.level == "error":
                problems.append(f"{f.relative_to(paths.ROOT)}:{p.line}:{p.column}: {p.desc} ({p.rule})")
    return "; ".join(problems)[:800] if problems else "ok"


def _helm_lint(chart: Path, values: list[Path], major: int) -> str:
    try:
        helm.build_dependencies(chart, major=major)
    except subprocess.CalledProcessError as error:
        return f"helm dependency build: {(error.stderr or '').strip()[:300]}"
    problems = []
    runs: list[Path | None] = list(values) or [None]
    for v in runs:
        args = ["lint", str(chart)] + (["--values", str(v)] if v else [])
        run = helm.run(args, major=major)
        if run.returncode != 0:
            lines = [ln for ln in (run.stdout + run.stderr).splitlines() if "[ERROR]" in ln or "Error" in ln]
            problems.append(f"{v.name if v else 'defaults'}: {' '.join(lines)[:400]}")
    return "; ".join(problems) if problems else "ok"


def lint(majors: tuple[int, ...] = (3,)) -> tuple[list[ChartLint], str]:
    remote, branch, note = target_ref()
    results = []
    for chart in charts():
        result = ChartLint(chart.name)
        ci_values = sorted((chart / "ci").glob("*-values.yaml"))
        result.steps["version bump"] = _version_bump(chart, remote, branch)
        result.steps["Chart.yaml schema (yamale)"] = _yamale(chart / "Chart.yaml")
        result.steps["yamllint"] = _yamllint([chart / "Chart.yaml", chart / "values.yaml", *ci_values])
        for major in majors:
            result.steps[f"helm{major} lint x{max(len(ci_values), 1)}"] = _helm_lint(chart, ci_values, major)
        results.append(result)
    return results, note


def run_ct(remote: str, branch: str) -> subprocess.CompletedProcess[str]:
    """The real `ct lint` with ct.yaml against the same target ref (ct lints the charts changed since it)."""
    ct = toolchain.pinned("ct")
    # ct runs `helm`, `yamllint` and `yamale` from PATH: the pinned Helm 3 and this venv's tools
    search = os.pathsep.join(
        [str(paths.TOOLS_BIN), str(Path(sys.executable).parent), os.environ.get("PATH", "")]
    )
    env = {**os.environ, "PATH": search, "CT_CONFIG_DIR": str(ETC)}
    command = [str(ct), "lint", "--config", str(CT_CONFIG), "--remote", remote, "--target-branch", branch]
    return subprocess.run(command, cwd=paths.ROOT, capture_output=True, text=True, env=env, timeout=600)
