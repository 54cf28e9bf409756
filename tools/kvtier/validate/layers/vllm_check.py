"""vLLM's own judgement of the rendered engine arguments (`kvtier validate --vllm`).

The `vllm serve` arguments of every rendered engine (a Deployment, or a StatefulSet under kvaware routing)
are parsed and checked by the pinned vLLM
in the engine venv (engine_rig/vllm_args_probe.py: its parser, EngineArgs and config classes, the checks
the serve path runs before it reads the model). All files of a run share one probe process: importing
vLLM is most of its cost. A refused argument is traced to the values key that renders it: the model's
extraArgs when the flag is there, else the chart key the flag comes from.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvtier.engine_rig import rig
from kvtier.engine_rig.errors import RigError
from kvtier.upstream import vllm_args
from kvtier.validate.findings import VLLM, Finding
from kvtier.validate.inputs.loader import KeyPath, Loaded, format_path

PROBE = Path(rig.__file__).with_name("vllm_args_probe.py")
MODEL_LABEL = "kv-tiered-inference/model"
# flag -> the models[] key (str) or the values path (tuple) the chart renders it from
FLAG_KEYS: dict[str, str | KeyPath] = {
    "--max-model-len": "maxModelLen",
    "--tensor-parallel-size": "gpusPerReplica",
    "--dtype": "dtype",
    "--gpu-memory-utilization": "gpuMemoryUtilization",
    "--served-model-name": "model",
    "--port": ("engine", "port"),
    "--kv-transfer-config": ("cache", "kvLoadFailurePolicy"),
    "--prefix-caching-hash-algo": ("cache", "hashAlgorithm"),
}
# A refusal of the native offloading's own checks (the probe's kv-offloading stage), by what it names.
OFFLOADING_KEYS: tuple[tuple[str, KeyPath], ...] = (
    ("block_size", ("cache", "chunkSize")),
    ("cpu_bytes_to_use", ("cache", "l1", "size")),
    ("secondary tier", ("cache", "l2")),
)
TIMEOUT = 600


@dataclass(frozen=True)
class Engine:
    """One rendered engine container: whose file, which model entry, its args after `vllm`."""

    file: str
    model: str
    workload: str  # Kind/name of the object that runs it
    args: list[str]


# the kinds the chart runs engines as: a Deployment, or a StatefulSet when kvaware routing names replicas
ENGINE_KINDS = ("Deployment", "StatefulSet")


def engines(manifests: list[dict[str, Any]], file: str) -> list[Engine]:
    out = []
    for m in manifests:
        if m.get("kind") not in ENGINE_KINDS:
            continue
        template = (m.get("spec") or {}).get("template") or {}
        for c in (template.get("spec") or {}).get("containers") or []:
            if c.get("command") == ["vllm"] and isinstance(c.get("args"), list):
                model = ((template.get("metadata") or {}).get("labels") or {}).get(MODEL_LABEL, "")
                workload = f"{m['kind']}/{(m.get('metadata') or {}).get('name')}"
                out.append(Engine(file, str(model), workload, c["args"]))
    return out


def probe(all_engines: list[Engine]) -> list[dict[str, Any]] | str:
    """The probe's verdict per engine, or why it could not run."""
    try:
        python = rig.engine_python()
    except RigError as error:
        return str(error)
    with tempfile.TemporaryDirectory(prefix="kvtier-vllm-") as folder:
        cases = Path(folder) / "cases.json"
        cases.write_text(json.dumps([[str(a) for a in e.args] for e in all_engines]))
        try:
            run = subprocess.run(
                [str(python), str(PROBE), str(cases)], capture_output=True, text=True, timeout=TIMEOUT
            )
        except subprocess.TimeoutExpired:
            return f"the vLLM probe took over {TIMEOUT} s"
    verdicts = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    if run.returncode != 0 or len(verdicts) != len(all_engines):
        return f"the vLLM probe failed (exit {run.returncode}): {run.stderr.strip().splitlines()[-1:]}"
    return verdicts


def _key(flag: str, model_name: str, loaded: Loaded) -> KeyPath:
    models = loaded.data.get("models") if isinstance(loaded.data, dict) else None
    index = next(
        (i for i, m in enumerate(models or []) if isinstance(m, dict) and m.get("name") == model_name), None
    )
    if index is not None:
        extra = models[index].get("extraArgs")  # type: ignore[index]
        view = vllm_args.read(extra if isinstance(extra, list) else [])
        named = view.last(flag) or next((s for s in reversed(view.settings) if s.name == flag), None)
        if named is not None:  # the item vLLM names, in whatever spelling the user wrote it
            return ("models", index, "extraArgs", named.index)
    target = FLAG_KEYS.get(flag)
    if isinstance(target, tuple):
        return target
    if target and index is not None:
        return ("models", index, target)
    return ("models", index, "extraArgs") if index is not None else ()


def finding(engine: Engine, verdict: dict[str, Any], loaded: Loaded) -> Finding:
    flag = str(verdict.get("flag") or "")
    key = _key(flag, engine.model, loaded) if flag else ()
    if verdict.get("stage") == "kv-offloading":
        error = str(verdict.get("error"))
        key = next((k for word, k in OFFLOADING_KEYS if word in error), ("cache", "backend"))
    line, column = loaded.where(key) if key else (None, None)
    stage = verdict.get("stage") or "check"
    return Finding(
        VLLM,
        f"vllm.{stage}",
        f"{flag + ': ' if flag else ''}{verdict.get('error')}",
        engine.file,
        line,
        column,
        format_path(key) if key else "",
        subject=engine.workload,
        suggestion="change the argument vLLM refuses (its words above), in the values key named",
    )


__all__ = ["Engine", "engines", "finding", "probe"]
