"""What vLLM's native fs tier keys on, measured: an engine pod as the chart renders it with
`cache.backend: vllm-native`, turned into a case for engine_rig/offload_key_probe.py, which computes with
vLLM's own code where that pod writes (and so looks for) each chunk of a prompt.

`pod_case` reads the rendered container the way the kubelet would run it (rendered.local_process: the fs
tier's root_dir mapped to a local directory, $(POD_NAME) expanded): model argument, served name, revision,
dtype, KV block size, tensor parallel size and prefix hash from its `vllm serve` args, PYTHONHASHSEED from
its env. `run_cases` runs a list of cases in one engine-venv process.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.engine import invariants
from kvtier.engine_rig import rendered
from kvtier.upstream import vllm_args
from kvtier.validate.checks.engine_rules import GPU_DEFAULT_BLOCK_SIZE

PROBE = Path(__file__).with_name("offload_key_probe.py")


@dataclass(frozen=True)
class NativePod:
    case: dict[str, Any]  # the probe case, without tokens
    seed: str  # PYTHONHASHSEED of the pod
    l2_dir: Path  # the fs tier's root_dir, mapped to this machine


def pod_case(
    engine: rendered.RenderedEngine, l2_volume: Path, work_dir: Path, shape: dict[str, int]
) -> NativePod:
    """A probe case for one engine pod of `engine`; `shape`: layers and kv_heads of its model's KV."""
    volumes = {"l2cache": l2_volume, "model": work_dir / "models"}
    local = rendered.local_process(engine, Path("python"), volumes, work_dir / "etc-lmcache", port=0)
    args = local.argv[2:]  # after the python and the vllm launcher
    view = vllm_args.read(args)

    def flag(name: str, default: str) -> str:
        return view.value(name) or default

    case = {
        "transfer": flag("--kv-transfer-config", ""),
        "model_arg": args[1],
        "served_model_name": flag("--served-model-name", args[1]),
        "revision": flag("--revision", "main"),
        "dtype": invariants.DTYPES[flag("--dtype", "bfloat16")],
        "block_size": int(flag("--block-size", str(GPU_DEFAULT_BLOCK_SIZE))),
        "tensor_parallel": int(flag("--tensor-parallel-size", "1")),
        "hash_algorithm": flag("--prefix-caching-hash-algo", "sha256"),
        **shape,
    }
    assert local.l2_dir is not None, "the invariants are measured on renders with an L2"
    return NativePod(case, local.env["PYTHONHASHSEED"], local.l2_dir)


def run_cases(cases: list[dict[str, Any]], seed: str, work_dir: Path) -> list[dict[str, Any]]:
    """One verdict ({"files", "config_fields", "error"}) per case, from one probe process."""
    return invariants.run_cases(cases, seed, work_dir, PROBE)
