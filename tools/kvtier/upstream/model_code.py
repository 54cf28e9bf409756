"""Whether the pinned vLLM can read a model's config.json without running code from the model's repository,
and what it needs otherwise: the decisions of vLLM's HFConfigParser.parse (vllm/transformers_utils/config.py)
and transformers' AutoConfig.from_pretrained with resolve_trust_remote_code (transformers 5.19,
models/auto/configuration_auto.py and dynamic_module_utils.py), on the file's JSON object.

In order, as vLLM runs them:
- the model type is config.json's `model_type`; absent, "speculators" when it has a `speculators_config`, else
  the type vLLM maps its first architecture to;
- a type of vLLM's own architecture map or speculative configs is read with that class: no remote code;
- a type vLLM registers a config class for (its _CONFIG_REGISTRY) is then local code, and vLLM passes
  trust_remote_code=False on;
- AutoConfig: `auto_map.AutoConfig` is remote code; the file's `model_type` among transformers' (or vLLM's
  registered) types is local code. Remote code without local code and without trust is refused; with
  trust it runs (whether that code then works is the repository's business); otherwise a `model_type` no
  class knows is refused, and a file without `model_type` is refused ("Unrecognized model").
trust_remote_code given where local code exists changes nothing for a type vLLM registers; for a type of
transformers' own it makes AutoConfig run the repository's code instead: never a refusal at this step.

The facts (which types each knows, and which load formats and tokenizer modes vLLM has) are
vllm_model_support.json beside this module, dumped from the engine venv by
engine_rig/vllm_model_support_dump.py; tests/engine/test_model_code_vs_vllm.py holds this module to vLLM's
own get_config on generated configs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

TABLE = Path(__file__).with_name("vllm_model_support.json")

# What happens at the config step: read with no repository code (local), read by running the repository's
# code (remote: --trust-remote-code given), or refused for want of --trust-remote-code (needs-trust), for a
# type nothing knows (unknown-type), or for want of any model type (no-type).
Outcome = Literal["local", "remote", "needs-trust", "unknown-type", "no-type"]


@dataclass(frozen=True)
class Table:
    vllm: str
    transformers: str
    transformers_types: frozenset[str]
    vllm_registry: frozenset[str]
    architecture_types: Mapping[str, str]
    speculative: frozenset[str]
    load_formats: frozenset[str]  # --load-format names with a loader (get_model_loader)
    tokenizer_modes: frozenset[str]  # --tokenizer-mode names with a tokenizer class ("auto" resolves to one)


@lru_cache(maxsize=1)
def table() -> Table:
    data = json.loads(TABLE.read_text(encoding="utf-8"))
    return Table(
        str(data["vllm"]),
        str(data["transformers"]),
        frozenset(data["transformers_model_types"]),
        frozenset(data["vllm_config_registry"]),
        dict(data["architecture_to_model_type"]),
        frozenset(data["speculative_model_types"]),
        frozenset(data["load_formats"]),
        frozenset(data["tokenizer_modes"]),
    )


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    model_type: str | None  # the type vLLM settled on (None: none)
    auto_config: str = ""  # auto_map.AutoConfig, where the file names one

    @property
    def refused(self) -> bool:
        return self.outcome in ("needs-trust", "unknown-type", "no-type")


def _auto_config(config: Mapping[str, Any]) -> str | None:
    auto_map = config.get("auto_map")
    if isinstance(auto_map, Mapping) and "AutoConfig" in auto_map:
        return str(auto_map["AutoConfig"])
    return None


def config_step(config: Mapping[str, Any], trust_remote_code: bool) -> Verdict:
    """What the pinned vLLM's config step does with this config.json (its top-level JSON object)."""
    t = table()
    model_type = config.get("model_type")
    if model_type is None and config.get("speculators_config") is not None:
        model_type = "speculators"
    architectures = config.get("architectures")
    if model_type is None and isinstance(architectures, list) and architectures:
        model_type = t.architecture_types.get(str(architectures[0]))
    if model_type in t.architecture_types.values() or model_type in t.speculative:
        return Verdict("local", str(model_type))
    registered = isinstance(model_type, str) and model_type in t.vllm_registry
    trust = trust_remote_code and not registered
    remote = _auto_config(config)
    file_type = config.get("model_type")
    has_type = "model_type" in config
    local = has_type and isinstance(file_type, str) and (file_type in t.transformers_types or registered)
    typed = None if model_type is None else str(model_type)
    if remote is not None:
        if not local and not trust:
            return Verdict("needs-trust", typed, remote)
        if trust and not registered:
            return Verdict("remote", typed, remote)
    if has_type:
        return Verdict("local" if local else "unknown-type", typed, remote or "")
    return Verdict("no-type", None)


__all__ = ["TABLE", "Outcome", "Table", "Verdict", "config_step", "table"]
