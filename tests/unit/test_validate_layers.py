"""`kvtier validate` judges the values Helm would use: the chart defaults under the user's -f files and
--set flags, each finding at the file (and line) that wrote the value, or at the chart default with the
user key it sits under. The Helm semantics themselves are measured in tests/charts/test_helm_values.py,
test_helm_set.py and test_partial_overrides.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvtier import cli, exitcodes, paths
from kvtier.validate.inputs import loader, merge
from kvtier.validate.inputs.origins import Origins
from kvtier.validate.layers import render
from kvtier.validate.options import Options

UMBRELLA_VALUES = "charts/kv-tiered-inference/values.yaml"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _validate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[dict[str, Any]]]:
    code = cli.main(["validate", "--no-render", "-o", "json", *argv])
    out = capsys.readouterr().out
    return code, json.loads(out)["environments"] if out.strip() else []


def test_a_partial_override_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's example: Helm 3 and 4 render it, so validate must not say Helm would refuse it. (The
    image's LMCache release moves with its tag, so cache.lmcacheVersion moves too: the coupling rule.)"""
    values = "engine:\n  image:\n    tag: v0.5.6\ncache:\n  lmcacheVersion: '0.5.6'\n"
    env = _write(tmp_path, "env.yaml", values)
    code, [report] = _validate(capsys, str(env))
    assert report["checks"]["schema"]["status"] == "ok", report["findings"]
    assert code == exitcodes.OK


def test_a_null_that_removes_a_required_default_is_found_at_the_null(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = _write(tmp_path, "env.yaml", "engine:\n  image:\n    repository: null\n")
    code, [report] = _validate(capsys, str(env))
    # the chart's defaults also draw rule warnings (curvine-worker-local-to-its-disk); the schema's is the one
    [finding] = [f for f in report["findings"] if f["severity"] == "error"]
    assert code == exitcodes.FINDINGS
    assert (finding["rule"], finding["path"], finding["file"], finding["line"]) == (
        "schema.required",
        "engine.image",
        str(env),
        3,
    )
    assert f"removes the chart's default at {UMBRELLA_VALUES}:" in finding["message"]


def test_values_files_layer_in_order_and_findings_name_theirs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _write(tmp_path, "base.yaml", "engine:\n  image:\n    tag: v1\n")
    over = _write(tmp_path, "over.yaml", "router:\n  replicas: many\nengine:\n  image:\n    tag: v2\n")
    code, [report] = _validate(capsys, "-f", str(base), "-f", str(over))
    assert report["file"] == str(base), "without FILE|DIR the first -f file is the environment"
    # (The tags name no LMCache release, a warning of their own: lmcache-version-matches-image.)
    [finding] = [f for f in report["findings"] if f["severity"] == "error"]
    assert (finding["path"], finding["file"], finding["line"]) == ("router.replicas", str(over), 2)
    assert code == exitcodes.FINDINGS


def test_values_files_and_set_layer_over_each_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    over = _write(tmp_path, "over.yaml", "engine:\n  image:\n    tag: v2\n")
    envs = [str(paths.VALUES / "dev.yaml"), str(paths.VALUES / "cpu.yaml")]
    code, reports = _validate(capsys, *envs, "-f", str(over), "--set", "engine.image.tag=7")
    assert [r["file"] for r in reports] == envs
    for report in reports:
        [finding] = [f for f in report["findings"] if f["severity"] == "error"]
        assert (finding["rule"], finding["path"], finding["file"]) == (
            "schema.type",
            "engine.image.tag",
            "--set engine.image.tag=7",
        )
        assert "line" not in finding, "a flag has no line"
    assert code == exitcodes.FINDINGS
    code, reports = _validate(capsys, *envs, "--set-string", "engine.image.tag=7")
    assert code == exitcodes.OK
    assert all(f["severity"] == "warning" for r in reports for f in r["findings"]), reports


def test_a_malformed_set_is_a_bad_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["validate", "--no-render", "--set", "engine.image.tag"]) == exitcodes.USAGE
    error = capsys.readouterr().err
    assert "--set 'engine.image.tag': key 'tag' has no value" in error and "expected KEY=VALUE" in error


def test_a_set_the_file_makes_impossible_is_that_files_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = _write(tmp_path, "env.yaml", "target: standalone\n")
    code, [report] = _validate(capsys, str(env), "--set", "target.x=1")
    assert code == exitcodes.USAGE and "target is not a mapping" in report["fatal"]


def test_a_missing_values_file_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["validate", "--no-render", "-f", "nowhere.yaml"]) == exitcodes.USAGE
    assert "-f nowhere.yaml: no such values file" in capsys.readouterr().err


def test_the_render_gets_the_same_layers(tmp_path: Path) -> None:
    options = Options(values=(Path("b.yaml"),), sets=("a=1",), set_strings=("s=2",))
    command = render.template(Path("env.yaml"), 3, "r", "ns", "1.30.0", overlay=options.overlay()).command()
    start = command.index("env.yaml")
    assert command[start - 1 : start + 7] == [
        "-f",
        "env.yaml",
        "-f",
        "b.yaml",
        "--set",
        "a=1",
        "--set-string",
        "s=2",
    ]


def test_a_chart_default_is_located_in_the_chart_with_the_users_key(tmp_path: Path) -> None:
    env = _write(tmp_path, "env.yaml", "engine:\n  image:\n    tag: v9\n")
    loaded = loader.load(env)
    effective = merge.compute(loaded.data)
    spot = Origins([loaded], effective.chart).at(("engine", "image", "repository"), value=True)
    chart = loader.load(paths.CHARTS / "kv-tiered-inference" / "values.yaml")
    assert (spot.file, spot.line) == (UMBRELLA_VALUES, chart.where(("engine", "image", "repository"))[0])
    assert f"kept under your `engine.image` ({env}:2)" in spot.note
    assert Origins([loaded], effective.chart).at(("engine", "image", "tag")).line == 3


def test_a_subcharts_default_is_located_in_the_subchart(tmp_path: Path) -> None:
    env = _write(tmp_path, "env.yaml", "target: standalone\n")
    loaded = loader.load(env)
    origins = Origins([loaded], merge.compute(loaded.data).chart)
    assert origins.at(("curvine", "master", "replicas")).file == "charts/curvine/values.yaml"
    assert origins.at(("curvine", "enabled")).file == UMBRELLA_VALUES, "the umbrella's block wins"
    assert origins.at(("curvine", "global", "imageRegistry")).file == UMBRELLA_VALUES, "the parent's global"


def test_a_list_replaces_the_defaults_items_for_locating_too(tmp_path: Path) -> None:
    """models[0] written by the user: the chart's default models[0].resources is gone, not the origin."""
    env = _write(tmp_path, "env.yaml", "models:\n  - name: m\n")
    loaded = loader.load(env)
    spot = Origins([loaded], merge.compute(loaded.data).chart).at(("models", 0, "resources"))
    assert (spot.file, spot.line) == (str(env), 2)
