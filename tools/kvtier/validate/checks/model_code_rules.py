"""Code a model needs that the engine is not allowed to run: the model's config.json judged as the pinned
vLLM's config step judges it (kvtier.upstream.model_code), before any weight is read.

vLLM reads config.json first (ModelConfig -> vllm/transformers_utils/config.py get_config). A file whose
model type neither transformers nor vLLM knows is read only by running the repository's own configuration
code (auto_map.AutoConfig), which needs --trust-remote-code; a type no class knows, and a file without a
model type, are refused whatever the flag. The file judged is the one validate's model facts come from when
it is the model's own (a --model-config file, the model's folder, the Hub's, the local cache's snapshot), read
whole: a configuration validate's other rules cannot read (ChatGLM's `num_layers`) is judged here too.
The shipped facts are all of types both know, and are not judged.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from kvtier.upstream import model_code, vllm_options
from kvtier.validate import model_facts
from kvtier.validate.checks.engine_args_rules import severity_for_image
from kvtier.validate.rules import Hit, ValuesContext, rule
from kvtier.values import extra_args, lookup, model_entries

# --config-format values that read config.json with the Hugging Face parser (mistral reads params.json).
HF_FORMATS = (None, "auto", "hf")


def config_file(model: Mapping[str, Any], given: Mapping[str, Path]) -> Path | None:
    """The config.json vLLM would read for this models[] entry, where validate has the model's own."""
    seen = model_facts.look_up(model, given)
    facts = seen.facts
    if facts is not None and facts.kind == "hub" and seen.hub is not None and seen.hub.folder is not None:
        return seen.hub.folder / model_facts.CONFIG
    if facts is not None and facts.kind != "shipped":
        origin = Path(facts.origin)
        return origin / model_facts.CONFIG if origin.is_dir() else origin
    if seen.hub is not None and seen.hub.outcome == "read" and seen.hub.folder is not None:
        return seen.hub.folder / model_facts.CONFIG  # served, though validate's other rules cannot read it
    revision = lookup(model, "source", "huggingface", "revision")
    snapshot = model_facts.cached_snapshot(str(model.get("model") or ""), str(revision) if revision else None)
    return snapshot / model_facts.CONFIG if snapshot else None


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None  # model-facts-source (or --model-config's own check) says what is wrong with it
    return data if isinstance(data, dict) else None


def _judged_as_hf(view: Any) -> bool:
    """Whether vLLM reads config.json as written: no other config path, format or model-type override."""
    if view.value("--hf-config-path") is not None or view.value("--config-format") not in HF_FORMATS:
        return False
    overrides = view.value("--hf-overrides")
    if overrides is None:
        return True
    try:
        parsed = json.loads(overrides)
    except (ValueError, RecursionError):
        return False
    return isinstance(parsed, dict) and "model_type" not in parsed


@rule(
    "model-code-trusted",
    reason="vLLM reads the model's config.json with transformers before anything else: a model type neither "
    "the pinned transformers nor vLLM knows is read only by running the repository's own code "
    "(config.json's auto_map.AutoConfig), which vLLM refuses without --trust-remote-code; a type no class "
    "knows, and a config.json without model_type, are refused with or without it "
    "(vllm/transformers_utils/config.py HFConfigParser.parse; transformers/models/auto/"
    "configuration_auto.py AutoConfig.from_pretrained, dynamic_module_utils.py resolve_trust_remote_code): "
    "the engine exits at start",
    remedy="for a repository whose code you have read and trust, add --trust-remote-code to "
    "models[].extraArgs; for a type nothing knows, serve it with an engine image whose vLLM supports the "
    "model, or pin a revision of the repository that uses a known model_type",
)
def model_code_trusted(ctx: ValuesContext) -> Iterator[Hit]:
    t = model_code.table()
    severity, caveat = severity_for_image(ctx.values, t.vllm)
    for i, model in model_entries(ctx.values):
        name = model.get("model")
        if not isinstance(name, str) or not name:
            continue
        view = extra_args(model, vllm_options.table().known)
        if not _judged_as_hf(view):
            continue
        path = config_file(model, ctx.model_configs)
        config = _read(path) if path else None
        if config is None:
            continue
        trust = view.value("--trust-remote-code") == "true"
        verdict = model_code.config_step(config, trust)
        if verdict.refused:
            yield Hit(
                f"models[{i}].model {name}: {_why(verdict, t)}{caveat} (config.json read from {path})",
                ("models", i, "model"),
                severity=severity,
            )


def _why(verdict: model_code.Verdict, t: model_code.Table) -> str:
    knows = f"transformers {t.transformers} (the pinned vLLM {t.vllm}'s) and vLLM"
    if verdict.outcome == "needs-trust":
        typed = f"model_type {verdict.model_type!r}" if verdict.model_type else "no model_type"
        return (
            f"its config.json has {typed}, which neither {knows} know, and names the repository's "
            f"own configuration code (auto_map.AutoConfig {verdict.auto_config!r}): vLLM refuses to run that "
            "code without --trust-remote-code, and the engine exits; add --trust-remote-code to "
            "models[].extraArgs once you have read that code"
        )
    if verdict.outcome == "unknown-type":
        return (
            f"its config.json has model_type {verdict.model_type!r}, which neither {knows} know, and names "
            "no configuration code of its own (auto_map.AutoConfig): vLLM refuses it with or without "
            '--trust-remote-code ("Transformers does not recognize this architecture")'
        )
    return (
        "its config.json has no model_type (and no architecture vLLM maps to one, nor auto_map.AutoConfig): "
        'vLLM refuses it ("Unrecognized model"), with or without --trust-remote-code'
    )
