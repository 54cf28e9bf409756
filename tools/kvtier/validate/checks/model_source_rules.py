"""Rules on how an engine pod gets its model's weights (models[].source) against the pod's environment: the
Hub offline, a pinned revision the Hub does not have, a gated repository without a token, a cache dir smaller
than the weights.

The chart gives each standalone engine pod a fresh Hugging Face cache (HF_HOME on an emptyDir): a
`huggingface` source is downloaded by vLLM when the pod starts, every time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kvtier import quantity
from kvtier.plan.capacity import DTYPE_BYTES, ModelSpec
from kvtier.plan.facts import GIB
from kvtier.validate import hub_facts, model_facts
from kvtier.validate.rules import Hit, ValuesContext, rule
from kvtier.values import lookup, model_entries

# huggingface_hub's constants.py (2.4.0, in the engine venv): HF_HUB_OFFLINE = _is_true(HF_HUB_OFFLINE or
# TRANSFORMERS_OFFLINE), _is_true(v) = v.upper() in ENV_VARS_TRUE_VALUES.
ENV_VARS_TRUE_VALUES = set(hub_facts.OFFLINE_TRUE)
# huggingface_hub's constants.py: the token variables it reads (HF_TOKEN; the older name still works).
TOKEN_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


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


def _env_token(values: dict[str, Any]) -> bool:
    """engine.extraEnv sets a Hub token variable, literally or from a Secret (valueFrom)."""
    listed = lookup(values, "engine", "extraEnv", default=[])
    for entry in listed if isinstance(listed, list) else []:
        named = isinstance(entry, dict) and entry.get("name") in TOKEN_VARIABLES
        if named and (entry.get("value") or entry.get("valueFrom")):
            return True
    return False


@rule(
    "hub-revision-exists",
    reason="vLLM downloads a `huggingface` model at source.huggingface.revision: a branch, tag or commit the "
    "repository does not have is refused by the Hub (404 RevisionNotFound) and the engine exits before it "
    "loads anything, on every restart",
    remedy="pin a revision the repository has (a commit hash from its history, a branch or a tag; main when "
    "unset), or remove source.huggingface.revision",
)
def hub_revision_exists(ctx: ValuesContext) -> Iterator[Hit]:
    # Judged only where the Hub answered validate (kvtier.validate.hub_facts): offline it is not known.
    for i, model in model_entries(ctx.values):
        if not isinstance(lookup(model, "source", "huggingface"), dict):
            continue
        hub = model_facts.look_up(model, ctx.model_configs).hub
        if hub is not None and hub.outcome == "no-revision":
            pinned = lookup(model, "source", "huggingface", "revision")
            yield Hit(
                f"models[{i}].source.huggingface.revision {pinned!r}: {hub.why_not()}; vLLM's download fails "
                "the same way; expected a commit, branch or tag of the repository",
                ("models", i, "source", "huggingface", *(["revision"] if pinned else [])),
            )


@rule(
    "gated-model-needs-token",
    reason="a gated Hub repository (meta-llama, google/gemma, mistralai: the terms must be accepted first) "
    "serves its files only with a token of an account that accepted them; anonymously the Hub answers 401 "
    '"Cannot access gated repo" and vLLM exits before loading anything, on every restart',
    remedy="create a Secret with a Hugging Face token whose account accepted the model's licence and name it "
    "in models[].source.huggingface.tokenSecret (name, key), or serve the model from a claim that holds the "
    "weights (models[].source.pvc)",
)
def gated_model_needs_token(ctx: ValuesContext) -> Iterator[Hit]:
    # The chart passes tokenSecret to the engine as HF_TOKEN (standalone) and as the operator's
    # tokenSecretRef (HyperPod, templates/_hyperpod.tpl); an empty name means an anonymous download.
    env_token = lookup(ctx.values, "target") == "standalone" and _env_token(ctx.values)
    for i, model in model_entries(ctx.values):
        hub = lookup(model, "source", "huggingface")
        if not isinstance(hub, dict) or env_token:
            continue
        secret = hub.get("tokenSecret")
        if isinstance(secret, dict) and secret.get("name"):
            continue
        seen = model_facts.look_up(model, ctx.model_configs)
        if seen.gated:
            said = f"the Hub answered validate {seen.hub.gate_said}" if seen.hub and seen.hub.gated else ""
            yield Hit(
                f"models[{i}] ({model.get('model')}) is a gated Hub repository and "
                "source.huggingface.tokenSecret.name is empty: the download is anonymous and the Hub refuses "
                "it (401); expected the name of a Secret holding a token whose account accepted the licence "
                f"(gated: {said or 'as the shipped facts say'})",
                ("models", i, "source", "huggingface", "tokenSecret"),
            )


def _stored_bytes(facts: model_facts.ModelFacts) -> float | None:
    """Bytes of the safetensors a Hub download brings: the index's total_size, else parameters x the bytes of
    config.json's torch_dtype (the dtype the checkpoint is stored in)."""
    if facts.weight_bytes:
        return float(facts.weight_bytes)
    if facts.quantized:
        return None
    spec = ModelSpec.from_hf_config(facts.name, facts.config, facts.origin)
    size = DTYPE_BYTES.get(spec.dtype)
    return spec.params * size if size else None


@rule(
    "engine-cache-holds-weights",
    reason="a standalone engine downloads a `huggingface` model into its cache dir (HF_HOME), an emptyDir "
    "limited to engine.cacheSize: weights larger than that make the kubelet evict the pod for exceeding its "
    "ephemeral-storage limit during the download, and the next pod starts over, for ever",
    remedy="raise engine.cacheSize above the model's weights (plus tokenizer and config files), or serve the "
    "model from a claim that holds the weights (models[].source.pvc)",
)
def engine_cache_holds_weights(ctx: ValuesContext) -> Iterator[Hit]:
    # templates/engine-deployment.yaml: the `cache` volume (emptyDir, sizeLimit engine.cacheSize) is mounted
    # as HOME and HF_HOME; huggingface_hub's snapshot download writes the safetensors under HF_HOME/hub.
    if lookup(ctx.values, "target") != "standalone":
        return  # the HyperPod operator downloads the model itself
    size = lookup(ctx.values, "engine", "cacheSize")
    limit = quantity.try_parse(size) if size is not None else None
    if limit is None:
        return  # absent (the chart's default applies) or not a quantity: the schema reports it
    for i, model in model_entries(ctx.values):
        if not isinstance(lookup(model, "source", "huggingface"), dict):
            continue
        found = model_facts.find(model, ctx.model_configs)
        stored = _stored_bytes(found) if found else None
        if stored and stored > limit:
            yield Hit(
                f"engine.cacheSize {size} holds {float(limit) / GIB:.1f} GiB; models[{i}] "
                f"({model.get('model')}) downloads {stored / GIB:.1f} GiB of weights into it: the kubelet "
                "evicts the pod mid-download",
                ("engine", "cacheSize"),
            )
