"""--load-format and --tokenizer-mode as the pinned vLLM resolves them: a name it has no weight loader or
tokenizer class for is refused at start-up, though its parser takes any string for both.

vLLM lower-cases both (LoadConfig and ModelConfig field validators, vllm/config/load.py and model.py); the
loader comes from get_model_loader's table (vllm/model_executor/model_loader/__init__.py: "Load format ...
is not supported", when the workers load the weights), the tokenizer from TokenizerRegistry
(vllm/tokenizers/registry.py: "No tokenizer registered for tokenizer_mode", when the engine builds its input
processor; `auto` resolves to `hf`, or `mistral` for a Mistral repository), each with what vLLM's general
plugins register at start. --skip-tokenizer-init loads no tokenizer. The names are the pinned vLLM's
(kvtier.upstream.model_code's table, dumped from the engine venv); formats removed from vLLM (`gguf`,
`bitsandbytes`) and modes it no longer has (`slow`) are the usual cases.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from kvtier.upstream import model_code, vllm_args, vllm_options
from kvtier.validate.checks.engine_args_rules import severity_for_image
from kvtier.validate.findings import Severity
from kvtier.validate.rules import Hit, ValuesContext, rule
from kvtier.values import extra_args, model_entries


def refused_load_format(text: str) -> bool:
    return text.lower() not in model_code.table().load_formats


def refused_tokenizer_mode(text: str) -> bool:
    mode = text.lower()
    return mode != "auto" and mode not in model_code.table().tokenizer_modes


@rule(
    "vllm-loader-known",
    reason="vLLM's parser takes any --load-format and --tokenizer-mode, and the engine then exits at start "
    "when it has no weight loader or tokenizer class of that name (vllm/model_executor/model_loader/"
    "__init__.py get_model_loader, vllm/tokenizers/registry.py TokenizerRegistry): formats removed from "
    "vLLM (gguf, bitsandbytes) or modes it no longer has (slow) crash-loop the pod",
    remedy="use one of the names the message lists (auto for both is vLLM's default), or an engine image "
    "whose vLLM (or a plugin in it) provides the one you need",
)
def loader_known(ctx: ValuesContext) -> Iterator[Hit]:
    t = model_code.table()
    severity, caveat = severity_for_image(ctx.values, t.vllm)
    for i, model in model_entries(ctx.values):
        view = extra_args(model, vllm_options.table().known)
        yield from _check(
            i, view, "--load-format", refused_load_format, sorted(t.load_formats), caveat, severity
        )
        if view.value("--skip-tokenizer-init") != "true":
            modes = ["auto", *sorted(t.tokenizer_modes)]
            yield from _check(i, view, "--tokenizer-mode", refused_tokenizer_mode, modes, caveat, severity)


def _check(
    i: int,
    view: vllm_args.Argv,
    flag: str,
    refused: Callable[[str], bool],
    names: list[str],
    caveat: str,
    severity: Severity,
) -> Iterator[Hit]:
    setting = view.last(flag)
    if setting is None or setting.value is None or setting.dotted:
        return  # absent, or a missing value vllm-arg-invalid reports
    if refused(setting.value):
        kind = "weight loader" if flag == "--load-format" else "tokenizer"
        yield Hit(
            f"models[{i}].extraArgs[{setting.index}] {flag} {setting.value!r}: vLLM "
            f"{model_code.table().vllm} has no {kind} of that name and exits at start{caveat}; it has "
            f"{', '.join(names)}",
            ("models", i, "extraArgs", setting.index),
            severity=severity,
        )
