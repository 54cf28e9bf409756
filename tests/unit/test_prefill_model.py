"""The prefill rate on the chosen model and GPU (kvtier.plan.prefill): the scaling against a hand calculation,
its fallbacks, and what it moves: plan's break-even and l2-read-slower-than-recompute."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvtier import facts
from kvtier.cli import main
from kvtier.plan import capacity, prefill, readspeed
from kvtier.plan.facts import GIB, REFERENCE
from kvtier.validate import catalogue
from kvtier.validate.inputs import loader
from kvtier.validate.inputs.origins import Origins
from kvtier.validate.rules import ValuesContext

pytestmark = pytest.mark.unit

RULE = "l2-read-slower-than-recompute"
FIXTURES = Path(__file__).parents[1] / "fixtures" / "values"
GOOD = loader.load(FIXTURES / "good-minimal.yaml").data  # Qwen2-7B-Instruct on ml.g6e.4xlarge (L40S)
QWEN = yaml.safe_load((facts.MODELS / "qwen2-7b-instruct.yaml").read_text())["config"]
A10G_TFLOPS = 70.0  # a test figure for the reference's GPU, whose shipped figure is missing


def _spec(name: str = "qwen-like", **changes: Any) -> capacity.ModelSpec:
    return capacity.ModelSpec.from_hf_config(name, {**QWEN, **changes})


def _confirm_a10g(monkeypatch: pytest.MonkeyPatch, tflops: float = A10G_TFLOPS) -> None:
    gpu = facts.gpus()["A10G"]
    confirmed = dataclasses.replace(gpu, dense_fp16_tflops=tflops, dense_fp16_tflops_confirmed=True)
    monkeypatch.setitem(facts.gpus(), "A10G", confirmed)


# the arithmetic


def test_flops_per_token_of_qwen2_7b_by_hand() -> None:
    # per layer: attention 3584 x 128 x (2 x 28 + 2 x 4) = 29,360,128 weights, gated MLP 3 x 3584 x 18944 =
    # 203,685,888; x 28 layers = 6,525,288,448 non-embedding weights, 2 FLOPs each = 13,050,576,896;
    # attention over 1,250 earlier tokens: 4 x 28 layers x 3584 (28 x 128) x 1250 = 501,760,000
    spec = capacity.known_model(REFERENCE.model)
    assert spec is not None
    assert prefill.REFERENCE_CONTEXT == 1250
    assert prefill.flops_per_token(spec) == 13_050_576_896 + 501_760_000


def test_the_rate_scales_by_model_and_gpu_as_a_hand_calculation(monkeypatch: pytest.MonkeyPatch) -> None:
    _confirm_a10g(monkeypatch)
    twice = _spec(num_hidden_layers=56)  # every per-layer term doubles: half the rate
    found = prefill.estimate(1000.0, twice, "L40S", tensor_parallel=2)
    l40s = facts.gpus()["L40S"]
    assert l40s.dense_fp16_tflops == 362.05 and l40s.dense_fp16_tflops_confirmed
    assert found.model_factor == pytest.approx(0.5)
    assert found.gpu_factor == pytest.approx(2 * 362.05 / 70.0)
    assert found.tokens_per_s == pytest.approx(1000 * 0.5 * 2 * 362.05 / 70.0)  # 5,172 tokens/s
    assert not found.fell_back
    text = found.describe()
    assert "2 x L40S at 362.05 dense FP16 TFLOPS vs the A10G's 70" in text and "not a measurement" in text


def test_the_reference_itself_is_unchanged() -> None:
    spec = capacity.known_model(REFERENCE.model)
    assert spec is not None
    found = prefill.estimate(1000.0, spec, REFERENCE.gpu)
    assert found.tokens_per_s == pytest.approx(1000.0) and not found.fell_back
    # two A10Gs: twice the throughput, no figure needed
    assert prefill.estimate(1000.0, spec, REFERENCE.gpu, 2).gpu_factor == 2.0


# fallbacks: the reference's term, and the output says why


def test_an_unconfirmed_or_missing_gpu_figure_keeps_the_references_gpu_term(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = _spec(intermediate_size=2 * QWEN["intermediate_size"])
    missing = prefill.estimate(1000.0, spec, "L40S")  # the shipped A10G has no figure
    assert missing.gpu_factor == 1.0 and missing.fell_back and missing.model_factor < 1
    assert "A10G's dense FP16 TFLOPS are not known" in missing.describe()
    _confirm_a10g(monkeypatch)
    unconfirmed = prefill.estimate(1000.0, spec, "L4")  # shipped with an unconfirmed figure
    assert (
        unconfirmed.gpu_factor == 1.0 and "L4's 121 dense FP16 TFLOPS are unconfirmed" in unconfirmed.gpu_note
    )
    unknown = prefill.estimate(1000.0, spec, "")
    assert unknown.gpu_factor == 1.0 and "GPU not known" in unknown.gpu_note


def test_an_unconfirmed_model_or_a_mixture_of_experts_keeps_the_references_model_term() -> None:
    doubtful = prefill.estimate(1000.0, _spec(num_hidden_layers=56), "A10G", 1, "m's shipped hidden_size")
    assert doubtful.model_factor == 1.0 and "unconfirmed m's shipped hidden_size" in doubtful.model_note
    mixtral = capacity.known_model("mixtral-8x7b")
    assert mixtral is not None and mixtral.experts
    moe = prefill.estimate(1000.0, mixtral, "A10G")
    assert moe.model_factor == 1.0 and "mixture of experts" in moe.model_note


def test_a_measured_rate_is_not_rescaled() -> None:
    d = capacity.Deployment(model=_spec(num_hidden_layers=56), dtype_bytes=2, kv_dtype_bytes=2, gpu="A10G")
    measured = capacity.calibrate(capacity.reference_timing(), 900.0, 2500)
    assert prefill.timing_for(d, measured) == (measured, None)
    scaled, found = prefill.timing_for(d, capacity.reference_timing())
    assert found is not None and scaled.prefill_tps == pytest.approx(found.tokens_per_s)


# what it moves: kvtier plan's break-even


def _plan(capsys: pytest.CaptureFixture[str], tmp_path: Path, values: dict[str, Any]) -> dict[str, Any]:
    path = tmp_path / "env.yaml"
    path.write_text(yaml.safe_dump(values, sort_keys=False))
    assert main(["plan", str(path), "--read-gib-s", "1.84", "-o", "json"]) == 0
    [model] = json.loads(capsys.readouterr().out)["models"]
    return model


def _on(instance_type: str, model: str = "Qwen/Qwen2-7B-Instruct") -> dict[str, Any]:
    values = copy.deepcopy(GOOD)
    values["models"][0].update(instanceType=instance_type, model=model)
    return values


def test_a_faster_gpu_moves_the_break_even_up(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _confirm_a10g(monkeypatch)
    a10g = _plan(capsys, tmp_path, _on("ml.g5.2xlarge"))
    l40s = _plan(capsys, tmp_path, _on("ml.g6e.4xlarge"))
    assert l40s["timing"]["prefill_tps"] == pytest.approx(a10g["timing"]["prefill_tps"] * 362.05 / 70.0)
    assert a10g["break_even_tokens"] < l40s["break_even_tokens"]
    assert "L40S at 362.05" in l40s["prefill_estimate"]["description"]
    assert l40s["prefill_estimate"]["fell_back"] is False


def test_a_bigger_model_moves_the_break_even_down(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    small = _plan(capsys, tmp_path, _on("ml.g5.2xlarge", "Qwen/Qwen2.5-0.5B"))
    big = _plan(capsys, tmp_path, _on("ml.g5.2xlarge", "Qwen/Qwen2-7B-Instruct"))
    assert small["timing"]["prefill_tps"] > big["timing"]["prefill_tps"]
    assert big["break_even_tokens"] < small["break_even_tokens"]


def test_the_table_says_when_the_reference_is_kept(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "env.yaml"
    path.write_text(yaml.safe_dump(_on("ml.g6e.4xlarge"), sort_keys=False))
    assert main(["plan", str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "prefill: " in out and "A10G's dense FP16 TFLOPS are not known" in out


# what it moves: the rule


def _run(values: dict[str, Any]) -> list[Any]:
    loaded = loader.load_text(yaml.safe_dump(values, sort_keys=False), Path("env.yaml"))
    ctx = ValuesContext(loaded.data, loaded, origins=Origins([loaded]))
    return catalogue.run_values(ctx, only=[RULE])


def _read_at(monkeypatch: pytest.MonkeyPatch, gib_s: float) -> None:
    entry = facts.CurvineRead(
        "chart-defaults",
        readspeed.chart_defaults(),
        (gib_s, gib_s),
        None,
        None,
        "2026-12-06",
        "a test",
        "a test's machine",
        True,
    )
    monkeypatch.setattr(facts, "curvine_reads", lambda: {entry.name: entry})


def _edge_gib_s(model: str, gpu: str) -> float:
    """The read speed at which one chunk of `model` reads as fast as its tokens prefill on one `gpu`."""
    spec = capacity.known_model(model)
    assert spec is not None
    d = capacity.Deployment(model=spec, dtype_bytes=2, kv_dtype_bytes=2, gpu=gpu)
    timing, _ = prefill.timing_for(d, capacity.reference_timing())
    return capacity.chunk_file_bytes(d) * timing.prefill_tps / d.chunk / GIB


def test_the_rule_fires_on_a_faster_gpu_at_a_read_that_beats_the_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _confirm_a10g(monkeypatch)
    a10g, l40s = _edge_gib_s(REFERENCE.model, "A10G"), _edge_gib_s(REFERENCE.model, "L40S")
    assert l40s == pytest.approx(a10g * 362.05 / 70.0)
    _read_at(monkeypatch, 2 * a10g)  # beats recompute on the A10G, loses on the L40S
    assert _run(_on("ml.g5.2xlarge")) == []
    [finding] = _run(_on("ml.g6e.4xlarge"))
    assert finding.severity == "warning"
    assert "on 1 x L40S" in finding.message and "1 x L40S at 362.05 dense FP16 TFLOPS" in finding.message


def test_the_rule_fires_for_a_smaller_model_where_the_bigger_one_still_gains(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    small, big = _edge_gib_s("qwen2.5-0.5b", "A10G"), _edge_gib_s(REFERENCE.model, "A10G")
    assert big < small
    _read_at(monkeypatch, (small + big) / 2)
    assert _run(_on("ml.g5.2xlarge")) == []
    [finding] = _run(_on("ml.g5.2xlarge", "Qwen/Qwen2.5-0.5B"))
    assert "model " in finding.message and "GFLOP a token" in finding.message


def test_the_rule_says_when_it_keeps_the_references_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    _read_at(monkeypatch, 0.01)
    [finding] = _run(_on("ml.g6e.4xlarge"))
    assert "A10G's dense FP16 TFLOPS are not known: the reference's GPU term kept" in finding.message
