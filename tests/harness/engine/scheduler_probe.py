"""vLLM's SchedulerConfig alone, what kvtier's vllm-scheduler-budget rule is measured against: for each case,
whether the class refuses the settings at construction (its __post_init__ runs verify_max_model_len). Runs
in the engine venv, by path:

    .venv-engine/bin/python tests/harness/engine/scheduler_probe.py REQUEST.json

REQUEST: {"cases": [{"max_num_batched_tokens", "max_num_seqs", "enable_chunked_prefill",
"max_num_active_seqs", "long_prefill_token_threshold", "max_model_len"}]} (a null field: the class's
default). A case with "gpu": {"memory_gib", "name"} (or "cpu": true) and "world_size" is judged with the
batch defaults vLLM fills in first: EngineArgs._set_default_max_num_seqs_and_batched_tokens_args for
`vllm serve` on that device (the platform's device queries patched to answer for it), then the class.
Prints one JSON line: {"cases": [{"ok": bool, "error": vLLM's words or ""}]}.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

from vllm.config.scheduler import SchedulerConfig
from vllm.engine import arg_utils
from vllm.engine.arg_utils import EngineArgs
from vllm.usage.usage_lib import UsageContext

GIB = 1 << 30


def _defaulted(case: dict[str, Any]) -> dict[str, Any]:
    """The case's settings after vLLM's batch defaults for its device."""
    # EngineArgs itself resolves its model on construction: its default-filling method runs on a plain
    # namespace with the fields it reads instead.
    args = SimpleNamespace(
        max_num_batched_tokens=case["max_num_batched_tokens"],
        max_num_seqs=case["max_num_seqs"],
        enable_chunked_prefill=case["enable_chunked_prefill"],
        tensor_parallel_size=case["world_size"],
        pipeline_parallel_size=1,
        performance_mode=case.get("performance_mode", "balanced"),
        get_batch_defaults=EngineArgs.get_batch_defaults,
    )
    model = SimpleNamespace(max_model_len=case["max_model_len"], is_multimodal_model=False)
    gpu = case.get("gpu") or {"memory_gib": 0, "name": ""}
    platform = arg_utils.current_platform
    with (
        mock.patch.object(platform, "get_device_total_memory", lambda *a: int(gpu["memory_gib"] * GIB)),
        mock.patch.object(platform, "get_device_name", lambda *a: gpu["name"]),
        mock.patch.object(platform, "is_cpu", lambda: bool(case.get("cpu"))),
        mock.patch.object(platform, "is_tpu", lambda: False),
    ):
        EngineArgs._set_default_max_num_seqs_and_batched_tokens_args(
            args, UsageContext.OPENAI_API_SERVER, model, SimpleNamespace(use_batched_dp_moe=False)
        )
    keep = ("max_num_active_seqs", "long_prefill_token_threshold", "max_model_len")
    return {
        "max_num_batched_tokens": args.max_num_batched_tokens,
        "max_num_seqs": args.max_num_seqs,
        "enable_chunked_prefill": case["enable_chunked_prefill"],
        **{k: case.get(k) for k in keep},
    }


def judge(case: dict[str, Any]) -> dict[str, Any]:
    if "world_size" in case:
        case = _defaulted(case)
    fields = {k: v for k, v in case.items() if k != "max_model_len" and v is not None}
    try:
        SchedulerConfig(**fields, max_model_len=case["max_model_len"], is_encoder_decoder=False)
    except ValueError as error:  # pydantic's ValidationError is a ValueError
        return {"ok": False, "error": str(error).splitlines()[1] if "\n" in str(error) else str(error)}
    return {"ok": True, "error": ""}


def main() -> None:
    request = json.loads(Path(sys.argv[1]).read_text())
    print(json.dumps({"cases": [judge(c) for c in request["cases"]]}))


if __name__ == "__main__":
    main()
