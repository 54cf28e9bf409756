"""vLLM's SchedulerConfig alone, what kvtier's vllm-scheduler-budget rule is measured against: for each case,
whether the class refuses the settings at construction (its __post_init__ runs verify_max_model_len). Runs
in the engine venv, by path:

    .venv-engine/bin/python tests/harness/engine/scheduler_probe.py REQUEST.json

REQUEST: {"cases": [{"max_num_batched_tokens", "max_num_seqs", "enable_chunked_prefill",
"max_num_active_seqs", "long_prefill_token_threshold", "max_model_len"}]} (a null field: the class's
default). Prints one JSON line: {"cases": [{"ok": bool, "error": vLLM's words or ""}]}.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from vllm.config.scheduler import SchedulerConfig


def judge(case: dict[str, Any]) -> dict[str, Any]:
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
