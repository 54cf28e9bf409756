"""The fields of a Hugging Face config.json the planner reads, checked before any arithmetic.

A zero head count would divide by zero, a string layer count or a negative width would give nonsense
sizes: each is refused here with the file (or shipped model) and the key, so `kvtier plan` never ends
in a traceback or prints a plan computed from an impossible model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvtier import inputfiles
from kvtier.errors import UserError

REQUIRED = ("num_hidden_layers", "num_attention_heads", "hidden_size")
# Optional whole numbers and their least value; absent or null means "derive it" (or "none").
OPTIONAL = {
    "num_key_value_heads": 1,
    "head_dim": 1,
    "intermediate_size": 1,
    "vocab_size": 1,
    "kv_lora_rank": 0,
    "qk_rope_head_dim": 0,
    "sliding_window": 0,
}
MAX_DIM = 2**31 - 1  # every size in a real config fits int32
MAX_PARAMETERS = 1e15
FLAGS = ("use_sliding_window", "tie_word_embeddings")
TEXTS = ("torch_dtype", "dtype")
HINT = "(a Hugging Face config.json field)"


def read(path: Path) -> dict[str, Any]:
    """The JSON object in `path`, its fields checked; a UserError naming the file otherwise."""
    text = inputfiles.read_text(path, "JSON model config (a Hugging Face config.json)")
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as error:
        raise UserError(f"{path}: not JSON ({error}); expected a Hugging Face config.json") from None
    except RecursionError:
        raise UserError(f"{path}: JSON nested too deeply to be a model config") from None
    if not isinstance(cfg, dict):
        raise UserError(f"{path}: expected a JSON object (a Hugging Face config.json)")
    return checked(cfg, str(path))


def _fail(source: str, key: str, value: Any, expected: str) -> UserError:
    return UserError(f"{source}: {key}: {json.dumps(value)[:60]} is not {expected} {HINT}")


def _whole(cfg: dict[str, Any], key: str, least: int, source: str, prefix: str) -> None:
    value = cfg[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(source, prefix + key, value, f"a whole number >= {least}")
    if not least <= value <= MAX_DIM:
        raise _fail(source, prefix + key, value, f"a whole number from {least} to {MAX_DIM}")


def checked(cfg: dict[str, Any], source: str) -> dict[str, Any]:
    """The decoder's fields (a multimodal config's `text_config`), each of the right type and range."""
    prefix = ""
    if "num_hidden_layers" not in cfg and "text_config" in cfg:
        if not isinstance(cfg["text_config"], dict):
            raise _fail(source, "text_config", cfg["text_config"], "an object")
        cfg, prefix = cfg["text_config"], "text_config."
    missing = [key for key in REQUIRED if cfg.get(key) is None]
    if missing:
        raise UserError(
            f"{source}: missing {', '.join(prefix + k for k in missing)}; expected a Hugging Face "
            f"config.json with {', '.join(REQUIRED)}"
        )
    for key in REQUIRED:
        _whole(cfg, key, 1, source, prefix)
    for key, least in OPTIONAL.items():
        if cfg.get(key) is not None:
            _whole(cfg, key, least, source, prefix)
    for key in FLAGS:
        if cfg.get(key) is not None and not isinstance(cfg[key], bool):
            raise _fail(source, prefix + key, cfg[key], "true or false")
    for key in TEXTS:
        if cfg.get(key) is not None and not isinstance(cfg[key], str):
            raise _fail(source, prefix + key, cfg[key], "a dtype name such as bfloat16")
    types = cfg.get("layer_types")
    if types is not None and not (isinstance(types, list) and all(isinstance(t, str) for t in types)):
        raise _fail(source, prefix + "layer_types", types, "a list of layer type names")
    count = cfg.get("num_parameters")
    if count is not None and (
        isinstance(count, bool) or not isinstance(count, int | float) or not 0 < count <= MAX_PARAMETERS
    ):
        raise _fail(source, prefix + "num_parameters", count, f"a number from 1 to {MAX_PARAMETERS:g}")
    if not cfg.get("head_dim") and cfg["hidden_size"] < cfg["num_attention_heads"]:
        raise UserError(
            f"{source}: hidden_size {cfg['hidden_size']} / num_attention_heads {cfg['num_attention_heads']} "
            f"leaves no head dimension; set {prefix}head_dim, or check both {HINT}"
        )
    return cfg


def _gemma2_defaults(cfg: dict[str, Any]) -> dict[str, Any]:
    # transformers' Gemma2Config (models/gemma2/configuration_gemma2.py): tie_word_embeddings True,
    # sliding_window 4096, and layer_types, when absent, windowed on every even-numbered layer (0, 2, ...)
    layers = cfg.get("num_hidden_layers")
    types = (
        ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(layers)]
        if isinstance(layers, int) and not isinstance(layers, bool) and 0 < layers <= MAX_DIM
        else None
    )
    return {"tie_word_embeddings": True, "sliding_window": 4096, "layer_types": types}


# model_type -> the defaults its transformers config class gives keys a config.json leaves out (vLLM reads
# the config through that class). Only where the class default differs from what the planner assumes of
# an absent key (untied embeddings, no sliding window).
CLASS_DEFAULTS = {"gemma2": _gemma2_defaults}


def with_class_defaults(cfg: dict[str, Any]) -> dict[str, Any]:
    """The config as its transformers class reads it: keys the file leaves out take the class's defaults."""
    defaults = CLASS_DEFAULTS.get(str(cfg.get("model_type") or ""))
    if defaults is None:
        return cfg
    return {**{k: v for k, v in defaults(cfg).items() if v is not None}, **cfg}
