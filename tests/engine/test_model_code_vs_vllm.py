"""model-code-trusted against vLLM's own config step (the pinned vLLM in the engine venv, through
tests/harness/engine/model_code_probe.py): the committed table of model types is a fresh dump, and on seeded
generated model folders (model types transformers knows, vLLM registers, neither knows, null or absent; with
and without auto_map's AutoConfig and the configuration module it names; architectures vLLM maps to a type
or not) served with and without --trust-remote-code, the rule refuses exactly what vLLM's get_config refuses
for want of trust or of a known type, and nothing vLLM reads."""

from __future__ import annotations

import copy
import json
import random
import subprocess
from pathlib import Path
from typing import Any

import yaml

from harness import engine as engine_probes
from kvtier import paths
from kvtier.engine_rig import rig
from kvtier.upstream import model_code
from kvtier.validate import catalogue
from kvtier.validate.inputs import loader
from kvtier.validate.inputs.origins import Origins
from kvtier.validate.rules import ValuesContext

PROBE = Path(engine_probes.__file__).with_name("model_code_probe.py")
DUMP = Path(rig.__file__).with_name("vllm_model_support_dump.py")
GOOD = loader.load(Path(__file__).parents[1] / "fixtures" / "values" / "good-minimal.yaml").data
NAME = "example-org/generated"
DIMS = {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64, "vocab_size": 128}
# Refusals of the config step that are this rule's concern (vLLM's and transformers' words); a generated
# config may be refused for other reasons too (a registered multimodal class wanting its sub-configs).
ITS_CONCERN = ("trust_remote_code", "does not recognize this architecture", "Unrecognized model")
UNKNOWN = ["internlm2", "baichuan", "qwen", "minicpm", "exaone", "jais", "telechat", "no_such_type", ""]
ARCHITECTURES = ["LlamaForCausalLM", "InternLM2ForCausalLM", "LongcatFlashForCausalLM", "CustomForCausalLM"]
TRUST = {
    "given": ["--trust-remote-code"],
    "absent": [],
    "refused": ["--trust-remote-code", "--no-trust-remote-code"],
}


def test_the_committed_table_is_a_fresh_dump(work: Path) -> None:
    out = work / model_code.TABLE.name
    proc = subprocess.run(
        [str(rig.engine_python()), str(DUMP), str(out)], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert out.read_text() == model_code.TABLE.read_text(), (
        f"{model_code.TABLE.relative_to(paths.ROOT)} is not what the pinned vLLM dumps: re-run "
        f"{DUMP.relative_to(paths.ROOT)}"
    )


def _config(rng: random.Random) -> dict[str, Any]:
    t = model_code.table()
    config: dict[str, Any] = {"architectures": [rng.choice(ARCHITECTURES)]}
    kind = rng.choice(["known", "registered", "unknown", "absent", "null"])
    if kind == "known":
        config["model_type"] = rng.choice(
            ["llama", "qwen2", "deepseek_v2", rng.choice(sorted(t.transformers_types))]
        )
    elif kind == "registered":
        config["model_type"] = rng.choice(["chatglm", "kimi_k2", rng.choice(sorted(t.vllm_registry))])
    elif kind == "unknown":
        config["model_type"] = rng.choice(UNKNOWN)
    elif kind == "null":
        config["model_type"] = None
    draw = rng.random()
    if draw < 0.5:
        config["auto_map"] = {"AutoConfig": "configuration_custom.CustomConfig"}
    elif draw < 0.6:
        config["auto_map"] = {"AutoModelForCausalLM": "modeling_custom.CustomModel"}
    if rng.random() < 0.1:
        config["architectures"] = []
    return {**config, **DIMS}


def _folder(root: Path, n: int, config: dict[str, Any]) -> Path:
    folder = root / f"model-{n}"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    kind = json.dumps(str(config.get("model_type") or "custom"))
    (folder / "configuration_custom.py").write_text(  # the repository's own code, for a trusted read
        "from transformers import PretrainedConfig\n\n\n"
        f"class CustomConfig(PretrainedConfig):\n    model_type = {kind}\n"
    )
    return folder


def _refused_by_rule(folder: Path, args: list[str]) -> bool:
    values = copy.deepcopy(GOOD)
    values["models"][0].update(model=NAME, extraArgs=args)
    loaded = loader.load_text(yaml.safe_dump(values, sort_keys=False), Path("env.yaml"))
    ctx = ValuesContext(loaded.data, loaded, origins=Origins([loaded]), model_configs={NAME: folder})
    return any(f.severity == "error" for f in catalogue.run_values(ctx, only=["model-code-trusted"]))


def test_the_rule_refuses_what_vllm_refuses(work: Path, run_probe) -> None:
    rng = random.Random(20261206)
    cases = []
    for n in range(240):
        trust = rng.choice(sorted(TRUST))
        cases.append((_folder(work, n, _config(rng)), trust))
    request = work / "request.json"
    request.write_text(
        json.dumps({"cases": [{"folder": str(f), "trust_remote_code": t == "given"} for f, t in cases]})
    )
    proc = run_probe(PROBE, request)
    assert proc.returncode == 0, proc.stderr[-3000:]
    verdicts = json.loads(proc.stdout.strip().splitlines()[-1])["cases"]
    assert sum(not v["ok"] for v in verdicts) > 40 and sum(v["ok"] for v in verdicts) > 40  # both sides drawn
    wrong = []
    for (folder, trust), verdict in zip(cases, verdicts, strict=True):
        refused = _refused_by_rule(folder, TRUST[trust])
        ours = not verdict["ok"] and any(words in verdict["error"] for words in ITS_CONCERN)
        if (refused and verdict["ok"]) or (ours and not refused):
            wrong.append((json.loads((folder / "config.json").read_text()), trust, verdict["error"]))
    assert not wrong, wrong[:5]
