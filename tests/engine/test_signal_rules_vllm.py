"""engine-metrics-disabled (kvtier.validate.checks.signal_rules) against the pinned vLLM's own parser: for
generated `vllm serve` argvs that spell --disable-log-stats every way (underscores, prefixes, `=`, repeats,
mixed with other flags), stats_off must say "off" exactly when vLLM's parsed namespace has disable_log_stats
true, the value AsyncLLM turns its stat loggers (Prometheus included) off on."""

from __future__ import annotations

import json
import random
from pathlib import Path

from harness import engine as engine_probes
from kvtier.validate.checks.signal_rules import stats_off

PROBE = Path(engine_probes.__file__).with_name("vllm_parser_probe.py")
BASE = ["serve", "tiny-model"]
SPELLINGS = [
    "--disable-log-stats",
    "--disable_log_stats",
    "--disable-log-stat",
    "--disable-log",
    "--disable-log-s",
]
OTHERS = [
    ["--max-model-len", "1024"],
    ["--enable-prefix-caching"],
    ["--port", "8001"],
    ["--dtype", "float16"],
]


def argvs(n: int, seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    cases = [list(BASE)] + [[*BASE, s] for s in SPELLINGS]
    for _ in range(n):
        argv = list(BASE)
        for _ in range(rng.randint(0, 4)):
            argv += rng.choice([*([[s] for s in SPELLINGS]), *OTHERS])
        cases.append(argv)
    return cases


def test_stats_off_reads_the_flag_as_vllm_parses_it(work: Path, run_probe) -> None:
    cases = argvs(120, 20261206)
    request = work / "cases.json"
    request.write_text(json.dumps({"dests": ["disable_log_stats"], "argvs": cases}))
    proc = run_probe(PROBE, request)
    assert proc.returncode == 0, proc.stderr[-3000:]
    answer = json.loads(proc.stdout.strip().splitlines()[-1])
    checked = 0
    for argv, case in zip(cases, answer["cases"], strict=True):
        if not case["ok"]:
            continue  # vLLM refuses the argv (an ambiguous prefix): vllm-arg-invalid's business
        ours = stats_off(argv) is not None  # the container's args, as the rule reads them
        assert ours == bool(case["values"]["disable_log_stats"]), (argv, case)
        checked += 1
    assert checked > 60
    assert any(bool(c["values"].get("disable_log_stats")) for c in answer["cases"] if c["ok"])
