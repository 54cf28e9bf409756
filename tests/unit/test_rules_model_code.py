"""model-code-trusted (kvtier.validate.checks.model_code_rules, over kvtier.upstream.model_code): a model's
config.json judged as the pinned vLLM's config step judges it, for the files validate reads (a --model-config
file, the local Hugging Face cache's snapshot). tests/engine/test_model_code_vs_vllm.py holds the same
judgement to vLLM's own get_config on generated configs."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.hub_stand_in import own_hub_cache
from kvtier.upstream import model_code
from kvtier.validate import catalogue
from kvtier.validate.inputs import loader
from kvtier.validate.inputs.origins import Origins
from kvtier.validate.rules import ValuesContext

pytestmark = pytest.mark.unit

RULE = "model-code-trusted"
GOOD = loader.load(Path(__file__).parents[1] / "fixtures" / "values" / "good-minimal.yaml").data
NAME = "example-org/custom-7b"
DIMS = {"num_hidden_layers": 32, "num_attention_heads": 32, "hidden_size": 4096, "num_key_value_heads": 8}
REMOTE = {"AutoConfig": "configuration_custom.CustomConfig", "AutoModelForCausalLM": "modeling_custom.M"}


def _config(tmp_path: Path, **keys: Any) -> Path:
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps({**DIMS, **keys}))
    return folder


def _run(tmp_path: Path, args: list[str], config: dict[str, Any], **values: Any) -> list[Any]:
    doc = copy.deepcopy(GOOD)
    doc["models"][0].update(model=NAME, extraArgs=args)
    doc.update(values)
    folder = _config(tmp_path, **config)
    loaded = loader.load_text(yaml.safe_dump(doc, sort_keys=False), Path("env.yaml"))
    ctx = ValuesContext(loaded.data, loaded, origins=Origins([loaded]), model_configs={NAME: folder})
    return catalogue.run_values(ctx, only=[RULE])


def test_the_rule_is_registered_with_its_source() -> None:
    r = catalogue.all_rules()[RULE]
    assert r.scope == "values" and "vllm/transformers_utils/config.py" in r.reason
    assert "--trust-remote-code" in r.remedy


def test_custom_code_without_trust_is_refused_at_the_model(tmp_path: Path) -> None:
    [found] = _run(tmp_path, [], {"model_type": "internlm2", "auto_map": REMOTE})
    assert found.severity == "error" and found.path == "models[0].model"
    assert "--trust-remote-code" in found.message and "configuration_custom.CustomConfig" in found.message


def test_trust_given_lets_the_repository_code_read_it(tmp_path: Path) -> None:
    assert _run(tmp_path, ["--trust-remote-code"], {"model_type": "internlm2", "auto_map": REMOTE}) == []
    assert _run(tmp_path, ["--trust_remote_code"], {"model_type": "internlm2", "auto_map": REMOTE}) == []


def test_the_last_of_a_repeated_flag_wins(tmp_path: Path) -> None:
    args = ["--trust-remote-code", "--no-trust-remote-code"]
    assert [f.severity for f in _run(tmp_path, args, {"model_type": "internlm2", "auto_map": REMOTE})] == [
        "error"
    ]


@pytest.mark.parametrize(
    "model_type",
    [
        "deepseek_v2",  # transformers' own class: auto_map is not needed, and not run without trust
        "chatglm",  # vLLM registers its own config class: trust is turned off for it
    ],
)
def test_a_type_something_knows_needs_no_trust(tmp_path: Path, model_type: str) -> None:
    assert _run(tmp_path, [], {"model_type": model_type, "auto_map": REMOTE}) == []


def test_a_type_nothing_knows_is_refused_even_with_trust(tmp_path: Path) -> None:
    [found] = _run(tmp_path, ["--trust-remote-code"], {"model_type": "no_such_model_type"})
    assert found.severity == "error" and "with or without --trust-remote-code" in found.message


def test_no_model_type_is_refused_unless_an_architecture_maps_to_one(tmp_path: Path) -> None:
    [found] = _run(tmp_path, [], {"architectures": ["CustomForCausalLM"]})
    assert "Unrecognized model" in found.message
    assert _run(tmp_path, [], {"architectures": ["LongcatFlashForCausalLM"]}) == []


def test_another_config_path_or_format_is_not_judged(tmp_path: Path) -> None:
    config = {"model_type": "internlm2", "auto_map": REMOTE}
    assert _run(tmp_path, ["--hf-config-path", "/models/other"], config) == []
    assert _run(tmp_path, ["--config-format", "mistral"], config) == []
    assert _run(tmp_path, ["--hf-overrides", '{"model_type": "llama"}'], config) == []
    assert [f.severity for f in _run(tmp_path, ["--hf-overrides", '{"rope_theta": 1}'], config)] == ["error"]


def test_on_an_image_of_another_vllm_it_is_a_warning(tmp_path: Path) -> None:
    image = {"repository": "example/vllm", "tag": "nightly"}
    found = _run(tmp_path, [], {"model_type": "internlm2", "auto_map": REMOTE}, engine={"image": image})
    assert [f.severity for f in found] == ["warning"] and "not the chart's default image" in found[0].message


def test_a_cached_config_other_rules_cannot_read_is_judged(tmp_path: Path, monkeypatch: Any) -> None:
    cache = own_hub_cache(tmp_path, monkeypatch)
    commit = "0" * 40
    repo = cache / ("models--" + NAME.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    # ChatGLM-style keys: no num_hidden_layers, so validate's model facts pass it over
    (snapshot / "config.json").write_text(
        json.dumps({"model_type": "internlm2", "auto_map": REMOTE, "num_layers": 2})
    )
    doc = copy.deepcopy(GOOD)
    doc["models"][0].update(model=NAME)
    doc["models"][0]["source"]["huggingface"].pop("revision")
    loaded = loader.load_text(yaml.safe_dump(doc, sort_keys=False), Path("env.yaml"))
    [found] = catalogue.run_values(ValuesContext(loaded.data, loaded, origins=Origins([loaded])), only=[RULE])
    assert found.severity == "error" and str(snapshot) in found.message


@pytest.mark.parametrize(
    ("config", "trust", "outcome"),
    [
        ({"model_type": "internlm2", "auto_map": REMOTE}, False, "needs-trust"),
        ({"model_type": "internlm2", "auto_map": REMOTE}, True, "remote"),
        ({"model_type": "llama", "auto_map": REMOTE}, False, "local"),
        ({"model_type": "llama", "auto_map": REMOTE}, True, "remote"),  # trust runs the repository's code
        ({"model_type": "chatglm", "auto_map": REMOTE}, True, "local"),  # vLLM's class wins over trust
        ({"model_type": "internlm2"}, True, "unknown-type"),
        ({"model_type": None}, False, "unknown-type"),
        ({"auto_map": {"AutoConfig": "c.C"}}, False, "needs-trust"),
        ({"auto_map": {"AutoConfig": "c.C"}}, True, "remote"),
        ({"auto_map": {"AutoModel": "m.M"}}, True, "no-type"),
        ({"speculators_config": {}}, False, "local"),
    ],
)
def test_the_config_step(config: dict[str, Any], trust: bool, outcome: str) -> None:
    assert model_code.config_step(config, trust).outcome == outcome


def test_the_table_is_the_pinned_vllms() -> None:
    t = model_code.table()
    assert "llama" in t.transformers_types and "internlm2" not in t.transformers_types
    assert "chatglm" in t.vllm_registry and t.vllm and t.transformers
