"""vLLM's own resolution of --load-format and --tokenizer-mode, what kvtier's vllm-loader-known rule is
measured against: the load format through LoadConfig (which lower-cases it) and get_model_loader, the
tokenizer mode through ModelConfig's lower-casing validator, resolve_tokenizer_args (`auto` to a concrete
mode, on a local model folder) and TokenizerRegistry.load_tokenizer_cls, after vLLM's general plugins have
registered theirs, as at start-up. Runs in the engine venv, by path:

    .venv-engine/bin/python tests/harness/engine/loader_names_probe.py REQUEST.json

REQUEST: {"folder": a model folder with config.json, "cases": [{"load_format": str, "tokenizer_mode": str}]}.
Prints one JSON line: {"cases": [{"load_ok": bool, "tokenizer_ok": bool, "error": vLLM's words or ""}]}.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.update(VLLM_TARGET_DEVICE="cpu", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"

from vllm.config.load import LoadConfig
from vllm.config.model import ModelConfig
from vllm.model_executor.model_loader import get_model_loader
from vllm.plugins import load_general_plugins
from vllm.tokenizers.registry import TokenizerRegistry, resolve_tokenizer_args


def _load(case: dict) -> None:
    get_model_loader(LoadConfig(load_format=case["load_format"]))


def _tokenizer(case: dict, folder: str) -> None:
    mode = ModelConfig._lowercase_tokenizer_mode(case["tokenizer_mode"])
    TokenizerRegistry.load_tokenizer_cls(resolve_tokenizer_args(folder, tokenizer_mode=mode)[0])


def _refusal(step) -> str:
    """ "" when the step passes, else vLLM's words."""
    try:
        step()
    except Exception as error:  # any refusal is vLLM's verdict
        return str(error).splitlines()[0][:200] or type(error).__name__
    return ""


def judge(case: dict, folder: str) -> dict:
    load = _refusal(lambda: _load(case))
    tokenizer = _refusal(lambda: _tokenizer(case, folder))
    return {
        "load_ok": not load,
        "tokenizer_ok": not tokenizer,
        "error": "; ".join(e for e in (load, tokenizer) if e),
    }


def main(request: Path) -> None:
    data = json.loads(request.read_text())
    load_general_plugins()
    print(json.dumps({"cases": [judge(case, data["folder"]) for case in data["cases"]]}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
