"""vllm-loader-known (kvtier.validate.checks.model_format_rules): --load-format and --tokenizer-mode names the
pinned vLLM has no loader or tokenizer for. tests/engine/test_loader_names_vs_vllm.py holds it to vLLM's own
loader table and tokenizer registry."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvtier.validate import catalogue
from kvtier.validate.inputs import loader
from kvtier.validate.inputs.origins import Origins
from kvtier.validate.rules import ValuesContext

pytestmark = pytest.mark.unit

RULE = "vllm-loader-known"
GOOD = loader.load(Path(__file__).parents[1] / "fixtures" / "values" / "good-minimal.yaml").data


def _run(args: list[str], **values: Any) -> list[Any]:
    doc = copy.deepcopy(GOOD)
    doc["models"][0]["extraArgs"] = args
    doc.update(values)
    loaded = loader.load_text(yaml.safe_dump(doc, sort_keys=False), Path("env.yaml"))
    return catalogue.run_values(ValuesContext(loaded.data, loaded, origins=Origins([loaded])), only=[RULE])


def test_the_rule_is_registered_with_its_source() -> None:
    r = catalogue.all_rules()[RULE]
    assert r.scope == "values" and "get_model_loader" in r.reason and "TokenizerRegistry" in r.reason


@pytest.mark.parametrize(
    ("args", "index"),
    [
        (["--load-format", "gguf"], 0),  # removed from vLLM
        (["--quantization", "bitsandbytes", "--load-format=bitsandbytes"], 2),
        (["--tokenizer-mode", "slow"], 0),
        (["--tokenizer_mode=custom"], 0),
        (["--load-format", "safetensors", "--load-format", "gguf"], 2),  # the last one counts
    ],
)
def test_a_name_vllm_has_no_loader_for_is_refused(args: list[str], index: int) -> None:
    [found] = _run(args)
    assert found.severity == "error" and found.path == f"models[0].extraArgs[{index}]"
    assert "exits at start" in found.message


@pytest.mark.parametrize(
    "args",
    [
        ["--load-format", "safetensors", "--tokenizer-mode", "mistral"],
        ["--load-format", "SAFETENSORS", "--tokenizer-mode", "HF"],  # vLLM lower-cases both
        ["--load-format", "auto", "--tokenizer-mode", "auto"],
        ["--load-format", "runai_streamer"],
        ["--skip-tokenizer-init", "--tokenizer-mode", "slow"],  # no tokenizer is loaded
        ["--load-format", "gguf", "--load-format", "pt"],
    ],
)
def test_names_vllm_has_pass(args: list[str]) -> None:
    assert _run(args) == []


def test_on_an_image_of_another_vllm_it_is_a_warning() -> None:
    found = _run(["--load-format", "gguf"], engine={"image": {"repository": "example/vllm", "tag": "0.6.3"}})
    assert [f.severity for f in found] == ["warning"]
