"""Turn an environment values file (the umbrella's values model) into planner inputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvtier.errors import UserError
from kvtier.plan.capacity import DTYPE_BYTES, Deployment, ModelSpec, gpu_for, known_model, quantity_bytes
from kvtier.plan.facts import GIB, KNOWN_MODELS
from kvtier.upstream import vllm_args
from kvtier.values import lookup

# Defaults of the umbrella chart (values.yaml) for what `cache.l1.size: auto` subtracts from the memory limit.
DEFAULT_HEADROOM = "16Gi"  # cache.l1.headroom: vLLM itself (Python, CUDA context, tokenizer, buffers)
DEFAULT_SHM = "8Gi"  # engine.shmSize: memory-backed /dev/shm counts against the limit
MIN_L1_GIB = 1.0  # the chart refuses `auto` below this


def l1_budget_gib(values: dict[str, Any], memory_limit: Any) -> float:
    """Largest L1 that fits a pod memory limit: limit - /dev/shm - headroom (the chart's `auto`)."""
    headroom = quantity_bytes(lookup(values, "cache", "l1", "headroom", default=DEFAULT_HEADROOM))
    shm = quantity_bytes(lookup(values, "engine", "shmSize", default=DEFAULT_SHM))
    return max((quantity_bytes(memory_limit) - headroom - shm) / GIB, 0.0)


def _usable_fraction(cache: dict[str, Any], l2_gib: float) -> float:
    """Share of L2 kept by eviction: the high watermark, a percentage or a size (of the claim)."""
    eviction = lookup(cache, "l2", "eviction", default={}) or {}
    if not eviction.get("enabled", True):
        return 1.0
    high = str(eviction.get("highWatermark") or "100%")
    if high.endswith("%"):
        return min(float(high[:-1]) / 100, 1.0)
    return min(quantity_bytes(high) / GIB / l2_gib, 1.0) if l2_gib else 1.0


def kv_dtype_bytes(model_entry: dict[str, Any], model_dtype_bytes: int) -> int:
    """KV cache dtype: `--kv-cache-dtype` in extraArgs (as vLLM reads them) if set, else the model dtype
    (vLLM's `auto`)."""
    args = model_entry.get("extraArgs")
    value = vllm_args.read(args if isinstance(args, list) else []).value("--kv-cache-dtype")
    if value and value != "auto":
        return 1 if value.startswith("fp8") else DTYPE_BYTES.get(value, model_dtype_bytes)
    return model_dtype_bytes


def deployments(
    values: dict[str, Any],
    override: ModelSpec | None = None,
    gpu_mem_gib: float | None = None,
    source: str = "values",
) -> list[tuple[str, Deployment]]:
    """One planner input per entry of `models[]`."""
    models = values.get("models") or []
    if not isinstance(models, list) or not models:
        raise UserError(f"{source}: no models[] to plan for")
    out = []
    for index, entry in enumerate(models):
        if not isinstance(entry, dict):
            raise UserError(f"{source}: models[{index}] is not a mapping")
        label = str(entry.get("name") or f"models[{index}]")
        model_id = str(entry.get("model") or "")
        spec = override or known_model(model_id)
        if spec is None:
            raise UserError(
                f"{source}: models[{index}].model {model_id!r} has no shipped config; pass --model-config "
                f"<its config.json> (shipped: {', '.join(KNOWN_MODELS)})"
            )
        out.append((label, deployment(values, entry, spec, gpu_mem_gib, label)))
    return out


def deployment(
    values: dict[str, Any],
    entry: dict[str, Any],
    spec: ModelSpec,
    gpu_mem_gib: float | None = None,
    label: str = "",
) -> Deployment:
    """The planner input of one models[] entry whose model is `spec`; a size that is not a quantity is a
    UserError (the schema reports it by key)."""
    cache = values.get("cache") or {}
    label = label or str(entry.get("name") or "a models[] entry")
    dtype = str(entry.get("dtype") or "auto")
    if dtype == "auto":
        dtype = "float16" if spec.dtype == "float32" else spec.dtype
    dtype_bytes = DTYPE_BYTES.get(dtype, 2)
    gpus = int(entry.get("gpusPerReplica") or 1)
    gpu = gpu_for(entry.get("instanceType"))
    memory = gpu_mem_gib if gpu_mem_gib is not None else (gpu[2] if gpu else 0.0)
    l1_size = lookup(cache, "l1", "size", default=0)
    l1_enabled = lookup(cache, "l1", "enabled", default=True)
    limit = lookup(entry, "resources", "limits", "memory")
    if not l1_enabled:
        l1 = 0.0
    elif l1_size == "auto":
        l1 = l1_budget_gib(values, limit) if limit else 0.0
    else:
        l1 = float(l1_size or 0)
    l2 = 0.0
    if lookup(cache, "l2", "enabled", default=False):
        l2 = quantity_bytes(lookup(cache, "l2", "claim", "size", default=0)) / GIB
    usable = _usable_fraction(cache, l2)
    notes = (
        []
        if gpu or gpu_mem_gib is not None
        else [f"{label}: instance type {entry.get('instanceType')!r} unknown; give --gpu-memory-gib for L0"]
    )
    return Deployment(
        model=spec,
        dtype_bytes=dtype_bytes,
        kv_dtype_bytes=kv_dtype_bytes(entry, dtype_bytes),
        replicas=int(entry.get("replicas") or 1),
        gpus_per_replica=gpus,
        gpu=gpu[0] if gpu else "",
        gpu_mem_gib=memory,
        gpu_util=float(entry.get("gpuMemoryUtilization") or 0.9),
        l1_gib=l1,
        l2_gib=l2,
        l2_usable=usable,
        chunk=int(cache.get("chunkSize") or 256),
        backend=str(cache.get("backend") or "lmcache"),
        # the chart's L2 plugin seals chunk files on the standalone target only
        sealed=bool(lookup(cache, "l2", "integrity", default=True))
        and values.get("target", "standalone") == "standalone",
        notes=notes,
    )


def from_flags(
    spec: ModelSpec,
    dtype: str,
    gpu_mem_gib: float,
    l1_gib: float,
    l2_gib: float,
    backend: str = "lmcache",
    chunk: int = 256,
) -> Deployment:
    """A planner input without a values file (`kvtier plan --model ...`)."""
    dtype_bytes = DTYPE_BYTES.get(dtype, 2)
    return Deployment(
        model=spec,
        dtype_bytes=dtype_bytes,
        kv_dtype_bytes=dtype_bytes,
        gpu_mem_gib=gpu_mem_gib,
        l1_gib=l1_gib,
        l2_gib=l2_gib,
        chunk=chunk,
        backend=backend,
    )


def model_source_path(path: Path) -> Path:
    if not path.is_file():
        raise UserError(f"--model-config {path}: no such file")
    return path
