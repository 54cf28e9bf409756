"""pytest-helm-unittest as its own distribution: its wheel builds from tools/pytest-helm-unittest,
installs into a clean venv that has neither kvtier nor anything of this checkout, registers itself with
pytest through its entry point, and gives helm-unittest's verdicts there on a chart of the project."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import venv
from pathlib import Path

from render import helm_bin

from kvtier import paths

DISTRIBUTION = paths.ROOT / "tools" / "pytest-helm-unittest"
CHART = paths.CHARTS / "curvine"


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=900, cwd=cwd, check=False)


def _hermetic(python: str, chart: Path) -> list[str]:
    """pytest in `chart` with no ini file and no cache: only what the command line says."""
    return [
        python,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-c",
        "/dev/null",
        "--rootdir",
        str(chart),
    ]


def test_the_wheel_installs_into_a_clean_venv_and_runs_a_chart(tmp_path: Path, need) -> None:
    need(helm_bin(3).exists(), "pinned Helm 3 not built (make tools)")
    wheels = tmp_path / "wheels"
    built = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(wheels),
                 str(DISTRIBUTION))  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = wheels.glob("pytest_helm_unittest-*.whl")

    clean = tmp_path / "venv"
    venv.create(clean, with_pip=True)
    python = clean / "bin" / "python"
    # Its dependencies come from the index like any user's install; the wheel itself from the build.
    installed = _run(str(python), "-m", "pip", "install", "--quiet", str(wheel))
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert _run(str(python), "-c", "import kvtier").returncode != 0, "kvtier leaked into the clean venv"

    # A copy: snapshot files the run writes stay out of the checkout.
    chart = Path(shutil.copytree(CHART, tmp_path / "chart"))
    report = tmp_path / "report.json"
    ran = _run(
        *_hermetic(str(python), chart),
        "--helm-unittest-root", str(chart), "--helm-unittest-helm", str(helm_bin(3)),
        "--helm-unittest-report", str(report), str(chart),
        cwd=chart,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
    cases = json.loads(report.read_text())
    assert cases and {c["outcome"] for c in cases} == {"passed"}, ran.stdout[-2000:]
    print(f"{len(cases)} curvine cases passed under the clean venv's pytest-helm-unittest")


def test_without_a_helm_the_plugin_says_what_to_set(tmp_path: Path) -> None:
    chart = Path(shutil.copytree(CHART, tmp_path / "chart"))
    ran = _run(
        *_hermetic(sys.executable, chart),
        "--helm-unittest-root", str(chart), "--helm-unittest-helm", "no-such-helm-binary", str(chart),
        cwd=chart,
    )  # fmt: skip
    assert ran.returncode != 0
    assert "no Helm 3 binary at 'no-such-helm-binary'" in ran.stdout + ran.stderr
    assert "Traceback" not in ran.stdout + ran.stderr
