"""The vLLM judge of the differential test (tests/cluster/test_validate_judges.py), in one engine-venv
process: first the serve path's own checks of each argv (tools/kvtier/engine_rig/vllm_args_probe.py, its
verdict lines unchanged), then, per argv, what vLLM's parser read for the settings the scheduler-budget and
metrics rules are about, and the verdict of vLLM's SchedulerConfig on them (scheduler_probe.judge: the batch
defaults vLLM fills in for each device the engine may run on, then the class). Run by path:

    .venv-engine/bin/python tests/harness/engine/serve_judge_probe.py REQUEST.json

REQUEST: {"argvs": [argv, ...], "devices": [[device, ...], ...]}, a device being {"gpu": {"memory_gib",
"name"}} or {"cpu": true}. Prints the argv probe's lines, then one {"extras": {...}} line per argv: "parsed"
(null where vLLM's parser refused the argv) and "scheduler": null where not judged (the parser or an earlier
check refused, the model's own context length or chunked-prefill default would decide), else {"ok", "error",
"split"}; split is true where the devices disagree (the verdict then depends on the node's GPU, and "ok" is
false with the first refusal's words).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "tools" / "kvtier" / "engine_rig"))

import vllm_args_probe  # noqa: E402  (run by path: its folder is put on sys.path above)

EXTRAS = (
    "disable_log_stats",
    "max_num_batched_tokens",
    "max_num_seqs",
    "max_num_active_seqs",
    "long_prefill_token_threshold",
    "enable_chunked_prefill",
    "performance_mode",
    "max_model_len",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "runner",
    "convert",
)


def _scheduler(parsed: dict[str, Any], devices: list[dict[str, Any]]) -> dict[str, Any] | None:
    length = parsed["max_model_len"]
    if not isinstance(length, int) or length < 1:
        return None  # -1 or unset: the model's config.json decides
    if parsed["runner"] == "pooling" or parsed["convert"] not in (None, "none", "auto"):
        return None  # a pooling model's chunked-prefill default is the model's
    chunked = parsed["enable_chunked_prefill"]
    base = {
        "max_num_batched_tokens": parsed["max_num_batched_tokens"],
        "max_num_seqs": parsed["max_num_seqs"],
        "enable_chunked_prefill": True if chunked is None else chunked,  # a generating model's default
        "max_num_active_seqs": parsed["max_num_active_seqs"],
        "long_prefill_token_threshold": parsed["long_prefill_token_threshold"],
        "max_model_len": length,
        "world_size": (parsed["tensor_parallel_size"] or 1) * (parsed["pipeline_parallel_size"] or 1),
        "performance_mode": parsed["performance_mode"] or "balanced",
    }
    # imported only now: vLLM reads HF_HUB_OFFLINE and its version on import, after the argv probe's set-up
    from scheduler_probe import judge  # this folder is first on sys.path

    answers = [judge({**base, **device}) for device in devices]
    refused = [a for a in answers if not a["ok"]]
    return {
        "ok": not refused,
        "error": refused[0]["error"] if refused else "",
        "split": 0 < len(refused) < len(answers),
    }


def extras(argv: list[str], accepted: bool, devices: list[dict[str, Any]]) -> dict[str, Any]:
    try:
        args, _ = vllm_args_probe.parse(argv)
    except Exception:  # the argv probe's verdict already says why
        return {"parsed": None, "scheduler": None}
    if args.model_tag is not None:
        args.model = args.model_tag
    parsed = {key: getattr(args, key, None) for key in EXTRAS}
    return {"parsed": parsed, "scheduler": _scheduler(parsed, devices) if accepted and devices else None}


def main(path: Path) -> None:
    request = json.loads(path.read_text())
    mine = os.fdopen(os.dup(1), "w")
    with tempfile.TemporaryDirectory(prefix="kvtier-judge-") as folder:
        cases, lines = Path(folder) / "cases.json", Path(folder) / "verdicts.jsonl"
        cases.write_text(json.dumps(request["argvs"]))
        with lines.open("w") as sink:  # the argv probe writes its verdicts to the stdout it finds
            os.dup2(sink.fileno(), 1)
            vllm_args_probe.main(cases)  # sets vLLM up, then sends vLLM's own output to stderr
        verdicts = lines.read_text().splitlines()
    accepted = [json.loads(line)["ok"] for line in verdicts]
    mine.write("".join(line + "\n" for line in verdicts))
    for argv, ok, devices in zip(request["argvs"], accepted, request["devices"], strict=True):
        mine.write(json.dumps({"extras": extras(argv, ok, devices)}, default=str) + "\n")
    mine.flush()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
