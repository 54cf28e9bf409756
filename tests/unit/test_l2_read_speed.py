"""The measured L2 read speed (tools/kvtier/facts/curvine_read.yaml) in `kvtier plan` and in
l2-read-slower-than-recompute (kvtier.validate.checks.l2_read_rules)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvtier import facts
from kvtier.cli import main
from kvtier.plan import capacity, readspeed
from kvtier.plan.facts import GIB, REFERENCE
from kvtier.validate import catalogue
from kvtier.validate.inputs import loader
from kvtier.validate.inputs.origins import Origins
from kvtier.validate.rules import ValuesContext

pytestmark = pytest.mark.unit

RULE = "l2-read-slower-than-recompute"
FIXTURES = Path(__file__).parents[1] / "fixtures" / "values"
GOOD = loader.load(FIXTURES / "good-minimal.yaml").data  # Qwen2-7B fp16, 256-token chunks, L2 on Curvine
QWEN_CONFIG = yaml.safe_load((facts.MODELS / "qwen2-7b-instruct.yaml").read_text())["config"]


def _qwen_chunk_file_bytes() -> int:
    """By hand from config.json: K and V x layers x KV heads x head dim (hidden / heads) x 2 bytes (fp16) a
    token, 256 tokens, LMCache's 28-byte header and the 24-byte integrity trailer (8 magic + 16 digest)."""
    c = QWEN_CONFIG
    head_dim = c["hidden_size"] // c["num_attention_heads"]
    per_token = 2 * c["num_hidden_layers"] * c["num_key_value_heads"] * head_dim * 2
    return 256 * per_token + 28 + 24


def _entry(name: str = "chart-defaults", gib_s: Any = 0.3, **settings: str) -> facts.CurvineRead:
    low, high = gib_s if isinstance(gib_s, tuple) else (gib_s, gib_s)
    return facts.CurvineRead(
        name,
        {**readspeed.chart_defaults(), **settings},
        (low, high),
        None,
        (1.1, 1.4),
        "2026-12-06",
        "benchmarks/x.py --cross-node",
        "a test's machine",
        True,
    )


def _measured(monkeypatch: pytest.MonkeyPatch, *entries: facts.CurvineRead) -> None:
    monkeypatch.setattr(facts, "curvine_reads", lambda: {e.name: e for e in entries})


def _run(values: dict[str, Any] | None = None) -> list[Any]:
    loaded = loader.load_text(yaml.safe_dump(values or GOOD, sort_keys=False), Path("env.yaml"))
    ctx = ValuesContext(loaded.data, loaded, origins=Origins([loaded]))
    return catalogue.run_values(ctx, only=[RULE])


def _break_even_gib_s() -> float:
    """The read speed at which one Qwen2-7B chunk reads as fast as its 256 tokens prefill."""
    return _qwen_chunk_file_bytes() * capacity.reference_timing().prefill_tps / 256 / GIB


# the shipped file


def test_every_shipped_entry_loads_with_its_source() -> None:
    entries = facts.curvine_reads()
    assert entries
    for e in entries.values():
        low, high = e.cross_node_gib_s
        assert 0 < low <= high
        assert e.measured and e.command and e.machine
        assert e.measured in e.source and e.command in e.source and e.machine in e.source
        assert ("preliminary" in e.source) == e.preliminary


def test_the_shipped_file_measures_the_charts_defaults() -> None:
    found = readspeed.measured_read(None)
    assert found.exact and found.settings == readspeed.chart_defaults()


SETTING = "read_chunk_size: 1MB, read_chunk_num: 8, read_parallel: 1"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("settings: {}", "no measured read setting"),
        (f"settings: {{a: {{{SETTING}}}}}", "needs cross_node_gib_s"),
        (
            f"settings: {{a: {{{SETTING}, cross_node_gib_s: [0, 1], measured: 2026-12-06, command: c,"
            " machine: m}}",
            "positive GiB/s",
        ),
    ],
)  # fmt: skip
def test_a_malformed_file_names_what_it_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, error: str
) -> None:
    path = tmp_path / "curvine_read.yaml"
    path.write_text(text)
    monkeypatch.setattr(facts, "CURVINE_READ", path)
    facts.curvine_reads.cache_clear()
    try:
        with pytest.raises(facts.FactsError, match=error):
            facts.curvine_reads()
    finally:
        facts.curvine_reads.cache_clear()


# which entry applies


def test_the_values_read_settings_choose_the_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    _measured(monkeypatch, _entry(gib_s=(0.2, 0.3)), _entry("chunk-2m", (0.4, 0.5), read_chunk_size="2MB"))
    values = copy.deepcopy(GOOD)
    assert readspeed.measured_read(values).entry.name == "chart-defaults"
    values["curvine"]["config"] = {"read": {"chunkSize": "2048KB"}}  # the same size, spelt otherwise
    found = readspeed.measured_read(values)
    assert found.entry.name == "chunk-2m" and found.exact and found.gib_s == 0.5  # the fastest run


def test_an_unmeasured_setting_falls_back_to_the_defaults_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _measured(monkeypatch, _entry(gib_s=0.3))
    values = copy.deepcopy(GOOD)
    values["curvine"]["config"] = {"read": {"parallel": 4}}
    found = readspeed.measured_read(values)
    assert found.entry.name == "chart-defaults" and not found.exact
    assert "no entry measured" in found.describe() and "read_parallel 4" in found.describe()


def test_without_an_entry_for_the_defaults_the_file_is_at_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    _measured(monkeypatch, _entry("chunk-2m", read_chunk_size="2MB"))
    with pytest.raises(facts.FactsError, match="defaults"):
        readspeed.measured_read(None)


# the arithmetic


def test_one_chunks_read_and_prefill_against_a_hand_calculation() -> None:
    spec = capacity.known_model("Qwen/Qwen2-7B-Instruct")
    assert spec is not None
    d = capacity.Deployment(model=spec, dtype_bytes=2, kv_dtype_bytes=2)
    timing = capacity.Timing(0.0, 0.0, 4000.0, read_gib_s=0.5)
    read_ms, prefill_ms = capacity.chunk_read_and_prefill_ms(d, timing)
    assert capacity.chunk_file_bytes(d) == _qwen_chunk_file_bytes() == 14_680_116
    assert read_ms == pytest.approx(14_680_116 / (0.5 * 2**30) * 1000)  # 27.34 ms
    assert prefill_ms == pytest.approx(256 / 4000 * 1000)  # 64 ms


# the rule


def test_the_rule_is_a_warning_on_either_side_of_the_break_even(monkeypatch: pytest.MonkeyPatch) -> None:
    edge = _break_even_gib_s()
    _measured(monkeypatch, _entry(gib_s=edge * 0.98))
    [finding] = _run()
    assert finding.rule == RULE and finding.severity == "warning"
    assert finding.path == "models[0].model" and finding.line is not None
    _measured(monkeypatch, _entry(gib_s=edge * 1.02))
    assert _run() == []


def test_the_warning_names_the_figures_their_source_and_how_to_measure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slow = _entry(gib_s=(0.05, 0.1))
    _measured(monkeypatch, slow)
    [finding] = _run()
    text = finding.message
    assert "0.1 GiB/s" in text and "0.05-0.1" in text and "14,680,116 B" in text
    assert slow.source in text and "2026-12-06" in text and "preliminary" in text
    assert "not a production NVMe/EFA network" in text and "kvtier bench" in text
    assert f"{REFERENCE.l2_read_gib_s:g} GiB/s" in text


@pytest.mark.parametrize(
    "change",
    [
        lambda v: v["cache"]["l2"].update(enabled=False),
        lambda v: v["curvine"].update(enabled=False),
        lambda v: v["models"][0].update(model="acme/unknown-7b"),
    ],
    ids=["l2-off", "curvine-off", "unknown-model"],
)
def test_the_rule_judges_only_an_l2_on_curvine_of_a_known_model(
    monkeypatch: pytest.MonkeyPatch, change: Any
) -> None:
    _measured(monkeypatch, _entry(gib_s=0.01))
    values = copy.deepcopy(GOOD)
    assert _run(values)
    change(values)
    assert _run(values) == []


# kvtier plan


def _plan(capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, Any]:
    assert main(["plan", "--model", "qwen2-7b", "--prompt-tokens", "2500", "-o", "json", *flags]) == 0
    [model] = json.loads(capsys.readouterr().out)["models"]
    return model


def test_plan_uses_the_measured_speed_and_shows_the_references_beside_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _measured(monkeypatch, _entry(gib_s=(0.2, 0.3)))
    model = _plan(capsys)
    assert model["timing"]["read_gib_s"] == 0.3
    speeds = {s["name"]: s for s in model["l2_read_speeds"]}
    assert list(speeds) == ["reference", "measured"]
    assert speeds["reference"]["gib_s"] == REFERENCE.l2_read_gib_s
    assert "2026-12-06" in speeds["measured"]["source"] and "not a production" in speeds["measured"]["source"]
    # slower reads move the break-even up (capacity.Timing.break_even_tokens, tested in test_plan.py)
    assert speeds["measured"]["break_even_tokens"] > speeds["reference"]["break_even_tokens"]
    assert model["break_even_tokens"] == speeds["measured"]["break_even_tokens"]


def test_read_gib_s_still_overrides(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _measured(monkeypatch, _entry(gib_s=0.3))
    model = _plan(capsys, "--read-gib-s", "0.9")
    assert model["timing"]["read_gib_s"] == 0.9
    assert [s["name"] for s in model["l2_read_speeds"]] == ["reference", "measured", "given"]
    assert model["timing"]["read_source"].startswith("given")


def test_plan_table_prints_each_speed_with_its_break_even(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _measured(monkeypatch, _entry(gib_s=0.01))
    assert main(["plan", "--model", "qwen2-7b"]) == 0
    out = capsys.readouterr().out
    assert (
        f"reference {REFERENCE.l2_read_gib_s:g} GiB/s: break-even" in out
        and "measured 0.01 GiB/s: break-even never" in out
    )


def test_a_chunk_too_large_for_the_arithmetic_is_left_to_the_schema() -> None:
    """A float chunk size YAML reads as 1e308 makes the chunk's bytes an int no float holds (the CLI fuzz
    test found the traceback): the rule says nothing, the schema reports the value."""
    values = copy.deepcopy(GOOD)
    values["cache"]["chunkSize"] = 1e308
    assert _run(values) == []
