"""vllm-loader-known against vLLM's own resolution of --load-format and --tokenizer-mode (the pinned vLLM in
the engine venv, through tests/harness/engine/loader_names_probe.py): on seeded names (vLLM's own, in other
cases, formats and modes older or other releases had, near misses), the rule refuses exactly what vLLM's
loader table and tokenizer registry refuse."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import yaml

from harness import engine as engine_probes
from kvtier.upstream import model_code
from kvtier.validate import catalogue
from kvtier.validate.inputs import loader
from kvtier.validate.inputs.origins import Origins
from kvtier.validate.rules import ValuesContext

PROBE = Path(engine_probes.__file__).with_name("loader_names_probe.py")
GOOD = loader.load(Path(__file__).parents[1] / "fixtures" / "values" / "good-minimal.yaml").data
# Refusals of a name vLLM has that the rule leaves alone, by why: they depend on more than the name.
EXCUSED = {
    "requires the ModelExpress Python package": "a loader whose package the image may or may not ship",
    "tensorizer_config": "tensorizer's settings come from --model-loader-extra-config, not the name",
}
OTHERS = ["gguf", "bitsandbytes", "slow", "custom", "sharded-state", "safetensor", "tiktoken", "", "bin"]


def _name(rng: random.Random, own: frozenset[str]) -> str:
    name = rng.choice([*sorted(own), "auto", *OTHERS])
    return rng.choice([name, name.upper(), name.title()])


def _refused(load_format: str, tokenizer_mode: str) -> tuple[bool, bool]:
    values = copy.deepcopy(GOOD)
    values["models"][0]["extraArgs"] = [f"--load-format={load_format}", "--tokenizer-mode", tokenizer_mode]
    loaded = loader.load_text(yaml.safe_dump(values, sort_keys=False), Path("env.yaml"))
    found = catalogue.run_values(
        ValuesContext(loaded.data, loaded, origins=Origins([loaded])), only=["vllm-loader-known"]
    )
    errors = [f.path for f in found if f.severity == "error"]
    return "models[0].extraArgs[0]" in errors, "models[0].extraArgs[1]" in errors


def test_the_rule_refuses_what_vllm_refuses(work: Path, run_probe) -> None:
    t = model_code.table()
    rng = random.Random(20261206)
    cases = [
        {"load_format": _name(rng, t.load_formats), "tokenizer_mode": _name(rng, t.tokenizer_modes)}
        for _ in range(300)
    ]
    folder = work / "model"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]})
    )
    request = work / "request.json"
    request.write_text(json.dumps({"folder": str(folder), "cases": cases}))
    proc = run_probe(PROBE, request)
    assert proc.returncode == 0, proc.stderr[-3000:]
    verdicts = json.loads(proc.stdout.strip().splitlines()[-1])["cases"]
    for side in ("load_ok", "tokenizer_ok"):  # both verdicts drawn on both sides
        assert 30 < sum(v[side] for v in verdicts) < len(verdicts) - 30
    wrong = []
    for case, verdict in zip(cases, verdicts, strict=True):
        refused = _refused(case["load_format"], case["tokenizer_mode"])
        real = (not verdict["load_ok"], not verdict["tokenizer_ok"])
        excused = any(words in verdict["error"] for words in EXCUSED)
        false_refusal = any(r and not v for r, v in zip(refused, real, strict=True))
        if false_refusal or (refused != real and not excused):
            wrong.append((case, verdict))
    assert not wrong, wrong[:5]
