"""Rules on how an engine pod gets its model's weights (models[].source) against the pod's environment.

The chart gives each standalone engine pod a fresh Hugging Face cache (HF_HOME on an emptyDir): a
`huggingface` source is downloaded by vLLM when the pod starts, every time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kvtier.validate.rules import Hit, ValuesContext, rule
from kvtier.values import lookup, model_entries

# huggingface_hub's constants.py (2.4.0, in the engine venv): HF_HUB_OFFLINE = _is_true(HF_HUB_OFFLINE or
# TRANSFORMERS_OFFLINE), _is_true(v) = v.upper() in ENV_VARS_TRUE_VALUES.
ENV_VARS_TRUE_VALUES = {"1", "ON", "YES", "TRUE"}


def _literal_env(values: dict[str, Any]) -> dict[str, tuple[int, str]]:
    """engine.extraEnv's literal values by name, with their index; of a repeated name the kubelet keeps
    the last. An entry with valueFrom is known only in the cluster and left out."""
    env: dict[str, tuple[int, str]] = {}
    listed = lookup(values, "engine", "extraEnv", default=[])
    for i, entry in enumerate(listed if isinstance(listed, list) else []):
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            if "value" in entry and entry["value"] is not None:
                env[entry["name"]] = (i, str(entry["value"]))
            else:
                env.pop(entry["name"], None)
    return env


def hub_offline(env: dict[str, tuple[int, str]]) -> tuple[int, str] | None:
    """(index, name) of the variable that puts huggingface_hub offline, as it reads them, or None."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if name in env and env[name][1]:  # `a or b`: an empty HF_HUB_OFFLINE falls through to the other
            return (env[name][0], name) if env[name][1].upper() in ENV_VARS_TRUE_VALUES else None
    return None


@rule(
    "hub-offline-with-hub-source",
    reason="HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) makes huggingface_hub refuse every download, and a "
    "standalone engine pod starts with an empty Hugging Face cache (an emptyDir): a `huggingface` source "
    "cannot be fetched and vLLM exits before it serves",
    remedy="remove the offline variable from engine.extraEnv, or serve the model from a claim that holds "
    "the weights (models[].source.pvc)",
)
def hub_offline_with_hub_source(ctx: ValuesContext) -> Iterator[Hit]:
    if lookup(ctx.values, "target") != "standalone":
        return  # the HyperPod operator downloads the model itself, outside the engine container
    offline = hub_offline(_literal_env(ctx.values))
    if offline is None:
        return
    index, name = offline
    for i, model in model_entries(ctx.values):
        if isinstance(lookup(model, "source", "huggingface"), dict):
            yield Hit(
                f"engine.extraEnv[{index}] sets {name}, and models[{i}] ({model.get('model')}) comes "
                "from the Hugging Face Hub into an empty cache: the download is refused",
                ("engine", "extraEnv", index),
            )
