"""What LMCache really keys on, measured: engine pods as the chart renders them, each one LMCache engine
in its own process (engine_rig/lmcache_probe.py), storing in one and looking up in another through one L2
directory.

`pod_case` turns a rendered engine container (rendered.render_engine) into a probe case: the model argument,
world size and dtype from its `vllm serve` args, PYTHONHASHSEED from its env, and its LMCache file with the
L2 path mapped to a local directory. `run_cases` runs a list of cases in one engine-venv process.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kvtier.engine_rig import rendered
from kvtier.engine_rig.errors import RigError
from kvtier.engine_rig.rig import engine_python
from kvtier.upstream import vllm_args

PROBE = Path(__file__).with_name("lmcache_probe.py")
DTYPES = {
    "float16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "float32": "float32",
    "float": "float32",
}


@dataclass(frozen=True)
class Pod:
    case: dict[str, Any]  # the probe case (without action and tokens)
    seed: str  # PYTHONHASHSEED of the pod
    l2_dir: Path


def pod_case(engine: rendered.RenderedEngine, l2_volume: Path, work_dir: Path, shape: dict[str, int]) -> Pod:
    """A probe case for one engine pod of `engine`; `shape`: layers, kv_heads, head_size of its model's KV."""
    config_dir = work_dir / "etc-lmcache"
    volumes = {
        "l2cache": l2_volume,
        "model": work_dir / "models",
        "podscripts": rendered.CHART / "files" / "podscripts",
    }
    local = rendered.local_process(engine, Path("python"), volumes, config_dir, port=0)
    args = engine.args
    view = vllm_args.read(args)
    case = {
        "config": str(config_dir / "lmcache.yaml"),
        "model_arg": args[1],  # `serve <model argument>`: what vLLM gives LMCache as the model name
        "served_model_name": view.value("--served-model-name", args[1]),
        "world_size": int(view.value("--tensor-parallel-size", "1") or 1),
        "worker_id": 0,
        "dtype": DTYPES[view.value("--dtype", "bfloat16") or "bfloat16"],
        # The pod's PYTHONPATH (the podscripts ConfigMap when it records hits), for LMCache's plugin loader.
        "pythonpath": [p for p in local.env.get("PYTHONPATH", "").split(":") if p],
        **shape,
    }
    assert local.l2_dir is not None, "the invariants are measured on renders with an L2"
    return Pod(case, local.env["PYTHONHASHSEED"], local.l2_dir)


def variant_config(pod: Pod, work_dir: Path, name: str, **changes: Any) -> str:
    """The pod's LMCache file with `changes`, written next to it; returns its path."""
    config = yaml.safe_load(Path(pod.case["config"]).read_text())
    config.update(changes)
    path = work_dir / f"lmcache-{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def prompt_tokens(count: int, seed: int = 0) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(1, 2000) for _ in range(count)]


def run_cases(
    cases: list[dict[str, Any]], seed: str, work_dir: Path, probe: Path = PROBE
) -> list[dict[str, Any]]:
    """Run `cases` in one engine-venv process of `probe` (LMCache's by default) with PYTHONHASHSEED=seed;
    one verdict per case."""
    return run_cases_logged(cases, seed, work_dir, probe)[0]


def run_cases_logged(
    cases: list[dict[str, Any]], seed: str, work_dir: Path, probe: Path = PROBE
) -> tuple[list[dict[str, Any]], str]:
    """run_cases, and what the probe logged (stderr)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    request = work_dir / f"cases-{len(list(work_dir.glob('cases-*.json')))}.json"
    request.write_text(json.dumps(cases))
    env = {
        **os.environ,
        "PYTHONHASHSEED": seed,
        "LMCACHE_LOG_LEVEL": "WARNING",
        "VLLM_LOGGING_LEVEL": "WARNING",
    }
    proc = subprocess.run(
        [str(engine_python()), str(probe), str(request)], capture_output=True, text=True, timeout=600, env=env
    )
    verdicts = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or len(verdicts) != len(cases):
        raise RigError(f"{probe.name} failed ({exit_status(proc.returncode)}):\n{proc.stderr[-6000:]}")
    return verdicts, proc.stderr


def exit_status(returncode: int) -> str:
    """`exit N`, or the signal that killed the process: a crash (SIGSEGV) must read as one."""
    if returncode >= 0:
        return f"exit {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"killed by {name}, a crash"
