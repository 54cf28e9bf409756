"""The shipped facts as data (tools/kvtier/facts): every file loads, every entry names its source, a malformed
file is refused, and no rule refuses a values file on a fact that was not confirmed against its source."""

from __future__ import annotations

import copy
import dataclasses
import datetime
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvtier import facts
from kvtier.plan.capacity import ModelSpec
from kvtier.upstream import hyperpod_operator
from kvtier.validate import catalogue
from kvtier.validate.findings import Finding
from kvtier.validate.inputs import loader
from kvtier.validate.rules import Hit, ValuesContext

GOOD = loader.load(Path(__file__).parents[1] / "fixtures" / "values" / "good-minimal.yaml").data


def _date(text: str) -> datetime.date:
    return datetime.date.fromisoformat(text)


# -- what ships ---------------------------------------------------------------------------------------------


def test_every_model_file_loads_and_reads_as_a_config() -> None:
    models = facts.models()
    assert len(models) >= 20, sorted(models)
    for name, model in models.items():
        spec = ModelSpec.from_hf_config(name, model.config, "shipped")
        assert spec.layers > 0 and spec.kv_bytes_per_token(2) > 0, name
        assert len(set(i.lower() for i in model.ids)) == len(model.ids), f"{name}: an id listed twice"


def test_a_confirmed_model_names_the_published_config_of_every_id() -> None:
    confirmed = {n: m for n, m in facts.models().items() if not m.unconfirmed}
    assert confirmed, "no shipped model is confirmed against its published config.json"
    for name, model in confirmed.items():
        by_id = {s.id: s for s in model.sources}
        assert set(by_id) == set(model.ids), f"{name}: a source per id, got {sorted(by_id)}"
        for repo, source in by_id.items():
            assert re.search(rf"{re.escape(repo)}/(blob|raw|resolve)/[^/]+/config\.json$", source.url), source
            assert source.read_from and _date(source.checked) <= datetime.date.today(), source


def test_an_id_maps_to_one_model() -> None:
    seen: dict[str, str] = {}
    for name, model in facts.models().items():
        for repo in model.ids:
            assert repo.lower() not in seen, f"{repo} is in {seen.get(repo.lower())} and {name}"
            seen[repo.lower()] = name


def test_instance_facts_load_with_their_sources() -> None:
    types, gpus = facts.instance_types(), facts.gpus()
    assert "ml.g6e.4xlarge" in types and types["ml.g6e.4xlarge"].gpu == "L40S"
    for name, instance in types.items():
        assert name.startswith("ml.") and instance.gpu in gpus and instance.gpus >= 1, name
        if not instance.unconfirmed:
            assert instance.source is not None and _date(instance.source.checked), name
    for gpu in gpus.values():
        if gpu.confirmed:
            assert gpu.sources, gpu.name
    assert facts.instance_type("g6e.4xlarge") == types["ml.g6e.4xlarge"]


# -- a malformed file is refused, naming it -----------------------------------------------------------------


def _model_file(folder: Path, **fields: Any) -> Path:
    doc: dict[str, Any] = {
        "ids": ["acme/m-7b"],
        "sources": [
            {
                "id": "acme/m-7b",
                "url": "https://huggingface.co/acme/m-7b/blob/main/config.json",
                "read_from": "a copy",
                "checked": "2026-12-06",
            },
        ],
        "confirmed": True,
        "config": {
            "model_type": "llama",
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "hidden_size": 64,
        },
    }
    doc.update(fields)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "m-7b.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture
def model_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(facts, "MODELS", tmp_path / "models")
    facts.models.cache_clear()
    yield tmp_path / "models"
    facts.models.cache_clear()


def test_a_well_formed_model_file_loads(model_folder: Path) -> None:
    _model_file(model_folder, gated={"value": True, "source": "the Hub's gate page"})
    model = facts.models()["m-7b"]
    assert model.gated is True and not model.unconfirmed and model.sources[0].id == "acme/m-7b"


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"confirmed": True, "unconfirmed": ["hidden_size"]}, "confirmed is true, yet"),
        ({"sources": [{"id": "acme/m-7b", "url": "u", "checked": "2026-12-06"}]}, "needs read_from"),
        ({"sources": [{"id": "acme/other", "url": "u", "read_from": "r", "checked": "d"}]}, "not in ids"),
        ({"ids": []}, "ids must be"),
        ({"gated": {"value": True}}, "gated needs a source"),
        ({"config": ["not", "a", "mapping"]}, "expected a mapping"),
    ],
)
def test_a_malformed_model_file_is_refused_naming_it(
    model_folder: Path, fields: dict[str, Any], says: str
) -> None:
    path = _model_file(model_folder, **fields)
    with pytest.raises(facts.FactsError, match=re.escape(says)) as raised:
        facts.models()
    assert str(path) in str(raised.value)


def test_an_entry_not_confirmed_or_without_sources_is_unconfirmed(model_folder: Path) -> None:
    _model_file(model_folder, confirmed=False)
    assert facts.models()["m-7b"].unconfirmed == {"*"}
    facts.models.cache_clear()
    _model_file(model_folder, confirmed=False, unconfirmed=["hidden_size"])
    model = facts.models()["m-7b"]
    assert model.unconfirmed_of(["hidden_size", "num_hidden_layers"]) == ["hidden_size"]
    facts.models.cache_clear()
    _model_file(model_folder, sources=[])
    assert facts.models()["m-7b"].unconfirmed == {"*"}


# -- an error resting on an unconfirmed fact is a warning ---------------------------------------------------


def test_a_hit_resting_on_an_unconfirmed_fact_is_reported_as_a_warning() -> None:
    assert Hit("too long").settled() == ("too long", "error")
    message, severity = Hit("too long", unconfirmed="m's shipped max_position_embeddings").settled()
    assert severity == "warning" and "m's shipped max_position_embeddings" in message
    assert Hit("maybe", severity="warning", unconfirmed="x").settled() == ("maybe", "warning")


def _run(rule_id: str, **model: Any) -> list[Finding]:
    values = copy.deepcopy(GOOD)
    values["models"][0].update(model)
    loaded = loader.load_text(yaml.safe_dump(values, sort_keys=False), Path("env.yaml"))
    return catalogue.run_values(ValuesContext(loaded.data, loaded), only=[rule_id])


def _unconfirm(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    entry = facts.models()[name]
    monkeypatch.setitem(facts.models(), name, dataclasses.replace(entry, unconfirmed=frozenset({"*"})))


def test_a_context_beyond_an_unconfirmed_limit_is_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    model = facts.models()["qwen2-7b"]
    assert not model.unconfirmed, "the test needs a confirmed entry"
    too_long = {"model": model.ids[0], "maxModelLen": int(model.config["max_position_embeddings"]) * 2}
    [confirmed] = _run("max-model-len-within-model", **too_long)
    assert confirmed.severity == "error"
    _unconfirm(monkeypatch, "qwen2-7b")
    [doubtful] = _run("max-model-len-within-model", **too_long)
    assert doubtful.severity == "warning" and "max_position_embeddings" in doubtful.message


def test_heads_and_instance_figures_not_confirmed_refuse_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    odd = {"model": facts.models()["qwen2-7b"].ids[0], "gpusPerReplica": 3, "instanceType": "ml.g6e.12xlarge"}
    assert [f.severity for f in _run("tp-divides-heads", **odd)] == ["error"]
    _unconfirm(monkeypatch, "qwen2-7b")
    assert [f.severity for f in _run("tp-divides-heads", **odd)] == ["warning"]
    many = {"gpusPerReplica": 8, "instanceType": "ml.g6e.4xlarge"}
    instance = facts.instance_types()["ml.g6e.4xlarge"]
    if instance.unconfirmed:
        assert [f.severity for f in _run("gpus-fit-instance", **many)] == ["warning"]
    else:
        assert [f.severity for f in _run("gpus-fit-instance", **many)] == ["error"]
        monkeypatch.setitem(
            facts.instance_types(), instance.name, dataclasses.replace(instance, unconfirmed={"gpus"})
        )
        [doubtful] = _run("gpus-fit-instance", **many)
        assert doubtful.severity == "warning" and "ml.g6e.4xlarge's gpus" in doubtful.message


def test_mistral_nemo_past_128k_is_not_refused_on_a_figure_its_copies_disagree_on() -> None:
    # the 2024 copy of the base file says 128000, NeMo and a reviewer read 1,024,000: unconfirmed, a warning
    [base] = _run("max-model-len-within-model", model="mistralai/Mistral-Nemo-Base-2407", maxModelLen=200_000)
    assert base.severity == "warning" and "max_position_embeddings" in base.message
    # the instruct tune's current file says 131072 (confirmed): up to it nothing is said, past it an error
    assert (
        _run("max-model-len-within-model", model="mistralai/Mistral-Nemo-Instruct-2407", maxModelLen=131_072)
        == []
    )
    [instruct] = _run(
        "max-model-len-within-model", model="mistralai/Mistral-Nemo-Instruct-2407", maxModelLen=200_000
    )
    assert instruct.severity == "error"


def test_a_float32_checkpoint_is_read_as_float32() -> None:
    # Gemma 2's base checkpoints publish torch_dtype float32, their instruct tunes bfloat16 (the old table
    # left the key out of gemma-2-2b and gemma-2-27b, which read as bfloat16 and halved their download)
    models = facts.models()
    assert [models[n].config.get("torch_dtype") for n in ("gemma-2-2b", "gemma-2-27b")] == ["float32"] * 2
    assert models["gemma-2-2b-it"].config.get("torch_dtype") == "bfloat16"


def test_every_operator_fact_names_where_it_is_said() -> None:
    # the HyperPod operator is closed source: a fact is known only where a public file says it
    assert len(hyperpod_operator.FACTS) >= 10
    for fact in hyperpod_operator.FACTS:
        assert fact.what and fact.source, fact
        unsaid = fact.source.startswith("not published")  # "observed, not published" is still a source
        assert fact.known != unsaid, f"known must follow the source: {fact}"
        if fact.known:
            assert re.search(r"@ [0-9a-f]{40}|PyPI |reference deployment", fact.source), fact
    assert hyperpod_operator.MODEL_MOUNT_DEFAULT.startswith("/")
    assert {"args", "image", "resources"} <= set(hyperpod_operator.WORKER_FIELDS)


def test_a_confirmed_gpu_throughput_names_its_source() -> None:
    gpus = facts.gpus()
    assert any(g.dense_fp16_tflops_confirmed for g in gpus.values()), "no GPU throughput is confirmed"
    for gpu in gpus.values():
        if gpu.dense_fp16_tflops_confirmed:
            assert gpu.dense_fp16_tflops and gpu.dense_fp16_tflops_source, gpu.name
            assert _date(gpu.dense_fp16_tflops_source.checked), gpu.name


def test_a_confirmed_gpu_throughput_without_a_figure_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = yaml.safe_load(facts.INSTANCES.read_text(encoding="utf-8"))
    data["gpus"]["A10G"]["dense_fp16_tflops_confirmed"] = True  # the A10G has no figure
    path = tmp_path / "instances.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    monkeypatch.setattr(facts, "INSTANCES", path)
    facts._instances_file.cache_clear()
    try:
        with pytest.raises(facts.FactsError, match="A10G: a confirmed dense_fp16_tflops needs"):
            facts.gpus()
    finally:
        monkeypatch.undo()
        facts._instances_file.cache_clear()
