"""`kvtier lint` and the real `ct lint` (with ct.yaml) agree, and pass on the bundle's charts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kvtier import lint, paths

CT = paths.TOOLS_BIN / "ct"
CHART = {
    "Chart.yaml": "apiVersion: v2\nname: demo\nversion: 0.1.0\ndescription: a chart for lint tests\n",
    "values.yaml": "# -- greeting\ngreeting: hello\n",
    "templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n"
    "data:\n  greeting: {{ .Values.greeting | quote }}\n",
}


def _git(repo: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env=env)


@pytest.fixture
def repo(tmp_path: Path, need) -> Path:
    """A repository with one small chart, committed and published as origin/main."""
    need(
        CT.exists() and (paths.ROOT / ".tools" / "etc" / "lintconf.yaml").exists(), "ct not built: make tools"
    )
    for name, text in CHART.items():
        path = tmp_path / "charts" / "demo" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    shutil.copy(paths.ROOT / "ct.yaml", tmp_path / "ct.yaml")
    (tmp_path / ".tools").symlink_to(paths.ROOT / ".tools")
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "add", "charts", "ct.yaml")
    _git(tmp_path, "commit", "-qm", "demo 0.1.0")
    _git(tmp_path, "update-ref", "refs/remotes/origin/main", "HEAD")
    return tmp_path


def _kvtier_lint(repo: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KVTIER_ROOT": str(repo), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "kvtier.cli", "lint", *(argv or ("--ct",))],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _ct_exit(output: str) -> int:
    return 0 if "ct lint exit code 0" in output else 1


def test_unchanged_chart_passes_both(repo: Path) -> None:
    run = _kvtier_lint(repo)
    assert run.returncode == 0, run.stdout + run.stderr
    assert _ct_exit(run.stdout) == 0


def test_change_without_version_bump_fails_both(repo: Path) -> None:
    (repo / "charts" / "demo" / "values.yaml").write_text("# -- greeting\ngreeting: bonjour\n")
    run = _kvtier_lint(repo)
    assert run.returncode == 1
    assert "version 0.1.0 is not above 0.1.0" in run.stdout  # kvtier's own check
    assert "Needs a version bump" in run.stdout and _ct_exit(run.stdout) == 1  # the real ct


def test_bumped_version_passes_both(repo: Path) -> None:
    (repo / "charts" / "demo" / "values.yaml").write_text("# -- greeting\ngreeting: bonjour\n")
    chart_yaml = repo / "charts" / "demo" / "Chart.yaml"
    chart_yaml.write_text(chart_yaml.read_text().replace("0.1.0", "0.1.1"))
    run = _kvtier_lint(repo)
    assert run.returncode == 0, run.stdout[-3000:]


def test_release_after_its_pre_release_is_a_bump_for_both(repo: Path) -> None:
    """Semantic-version precedence, as ct's: 0.1.1 ranks above 0.1.1-rc.1 (a bare numeric compare of
    the MAJOR.MINOR.PATCH core calls them equal and wrongly asks for a bump)."""
    chart_yaml = repo / "charts" / "demo" / "Chart.yaml"
    chart_yaml.write_text(chart_yaml.read_text().replace("0.1.0", "0.1.1-rc.1"))
    _git(repo, "commit", "-qam", "demo 0.1.1-rc.1")
    _git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    (repo / "charts" / "demo" / "values.yaml").write_text("# -- greeting\ngreeting: bonjour\n")
    chart_yaml.write_text(chart_yaml.read_text().replace("0.1.1-rc.1", "0.1.1"))
    run = _kvtier_lint(repo)
    assert run.returncode == 0 and _ct_exit(run.stdout) == 0, run.stdout[-3000:]
    chart_yaml.write_text(chart_yaml.read_text().replace("0.1.1", "0.1.1-rc.0"))
    run = _kvtier_lint(repo)
    assert "version 0.1.1-rc.0 is not above 0.1.1-rc.1" in run.stdout and _ct_exit(run.stdout) == 1


@pytest.mark.parametrize(
    ("file", "text", "kvtier_says"),
    [
        ("Chart.yaml", "apiVersion: v2\nname: demo\nversion: 0.2.0\nkeywords: oops\n", "keywords"),
        ("values.yaml", "greeting: hello # no room\n", "too few spaces before comment"),
    ],
)
def test_yamale_and_yamllint_problems_fail_both(repo: Path, file: str, text: str, kvtier_says: str) -> None:
    (repo / "charts" / "demo" / file).write_text(text)
    run = _kvtier_lint(repo)
    assert run.returncode == 1
    assert kvtier_says in run.stdout
    assert _ct_exit(run.stdout) == 1


def test_fresh_clone_without_remote_uses_a_local_base(repo: Path) -> None:
    _git(repo, "update-ref", "-d", "refs/remotes/origin/main")
    run = _kvtier_lint(repo)
    assert "local stand-in refs/kvtier/base" in run.stdout
    assert run.returncode == 0, run.stdout[-3000:]


def test_bundle_charts_pass_kvtier_lint_and_real_ct_lint(need) -> None:
    need(CT.exists(), "ct not built: make tools")
    results, _ = lint.lint()
    problems = {
        r.chart: {k: v for k, v in r.steps.items() if v != "ok" and not v.startswith("skipped")}
        for r in results
        if r.failed
    }
    remote, branch, _ = lint.target_ref()
    ct = lint.run_ct(remote, branch)
    assert not problems and ct.returncode == 0, (problems, ct.stdout[-2000:])


def test_output_json_gives_each_charts_steps(repo: Path) -> None:
    (repo / "charts" / "demo" / "values.yaml").write_text("# -- greeting\ngreeting: bonjour\n")
    run = _kvtier_lint(repo, "-o", "json")
    report = json.loads(run.stdout)
    assert run.returncode == 1, run.stderr
    [demo] = report["charts"]
    assert demo["chart"] == "demo" and demo["failed"] and report["target"]
    assert "version 0.1.0 is not above 0.1.0" in demo["steps"]["version bump"]
    assert demo["steps"]["yamllint"] == "ok"
