"""The HyperPod L2 patch's settings, judged by the pinned LMCache itself (engine venv): the environment the
patch gives an InProcess endpoint through LMCache's own environment loader, and the MultiProcess
sidecar's --l2-adapter through the LMCache server's own argument parser; and, with cache.l2.integrity,
LMCache engines configured from nothing but that environment loading the chart's L2 plugin, sealing
chunk files and refusing one changed in place. The patch itself runs on the real API server in
tests/cluster/test_hyperpod_patch.py; here only what it writes is read back from the render."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.engine import invariants
from harness.hyperpod_patch import applied_env, by_endpoint
from kvtier import helm, paths
from kvtier.engine_rig import rig as engine_rig
from kvtier.engine_rig.errors import RigError
from kvtier.podscripts import l2_integrity

CHART = paths.CHARTS / "kv-tiered-inference"
ENV = paths.VALUES / "hyperpod-g6e-4xlarge.yaml"
PLUGIN = "remote_storage_plugin.kvtier_l2."
# Stand-in for the L1 settings the operator renders for enableL1Cache (docs/hyperpod.md), with a small L1.
OPERATOR_L1_ENV = {
    "LMCACHE_USE_EXPERIMENTAL": "True",
    "LMCACHE_LOCAL_CPU": "True",
    "LMCACHE_MAX_LOCAL_CPU_SIZE": "1",
}
TINY = {"layers": 2, "kv_heads": 2, "head_size": 64}
TOKENS = invariants.prompt_tokens(600, seed=11)  # two whole chunks of 256
# One sealed chunk file of TINY in bfloat16: KV + LMCache's 28-byte header + the integrity trailer.
CHUNK_BYTES = 2 * 2 * 2 * 64 * 2 * 256 + 28 + l2_integrity.TRAILER_BYTES

# Runs in the engine venv: one JSON line per input, what LMCache made of it.
JUDGE = """
import argparse, json, os, sys
from lmcache.v1.config import LMCacheEngineConfig
from lmcache.v1.distributed.l2_adapters.config import add_l2_adapters_args, parse_args_to_l2_adapters_config
request = json.loads(sys.argv[1])
for name, value in request["env"].items():
    os.environ[name] = value
config = LMCacheEngineConfig.from_env()
parser = add_l2_adapters_args(argparse.ArgumentParser())
adapters = []
for raw in request["adapters"]:
    (adapter,) = parse_args_to_l2_adapters_config(parser.parse_args(["--l2-adapter", raw])).adapters
    adapters.append({"class": type(adapter).__name__, "base_path": adapter.base_path})
print(json.dumps({"remote_url": config.remote_url, "remote_serde": config.remote_serde,
                  "chunk_size": config.chunk_size, "hash": config.pre_caching_hash_algorithm,
                  "adapters": adapters}))
"""


@pytest.fixture(scope="module")
def engine_python(need):
    try:
        return engine_rig.engine_python()
    except RigError as error:
        need(False, f"engine venv unavailable: {error}")


def rendered_policy(*args: str) -> dict[str, Any]:
    helm.build_dependencies(CHART)
    cmd = ["template", "kv", str(CHART), "-n", "team-a", "-f", str(ENV)]
    result = helm.run([*cmd, "--set", "hyperpod.patch.apiVersion=admissionregistration.k8s.io/v1", *args])
    assert result.returncode == 0, result.stderr
    (policy,) = [d for d in yaml.safe_load_all(result.stdout) if d and d["kind"] == "MutatingAdmissionPolicy"]
    return policy


def judge(engine_python, env: dict[str, str], adapters: list[str]) -> dict[str, Any]:
    request = json.dumps({"env": env, "adapters": adapters})
    proc = subprocess.run(
        [str(engine_python), "-c", JUDGE, request], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_lmcache_reads_the_patch_env_and_sidecar_argument_as_the_endpoints_namespace(engine_python) -> None:
    first = yaml.safe_load(ENV.read_text())["models"][0]
    second = {**first, "name": "llama", "model": "meta-llama/Llama-3.1-8B-Instruct"}
    models = ["--set-json", f"models={json.dumps([first, second])}"]
    inprocess = rendered_policy(*models, "--set", "cache.l2.integrity=false")
    multiprocess = rendered_policy(
        *models, "--set", "hyperpod.lmcache.mode=MultiProcess", "--set", "cache.l2.integrity=false"
    )
    adapters = by_endpoint(multiprocess, "adapter")
    seen = set()
    for endpoint in ("qwen2-7b", "llama"):
        env = applied_env(inprocess, endpoint)
        got = judge(engine_python, env, [adapters[endpoint]])
        assert got["remote_url"] == env["LMCACHE_REMOTE_URL"]
        assert (got["remote_serde"], got["chunk_size"], got["hash"]) == ("naive", 256, "builtin"), got
        (adapter,) = got["adapters"]
        assert adapter["class"] == "FSL2AdapterConfig", adapter
        # The sidecar's adapter stores where the InProcess URL would: the endpoint's own namespace.
        assert f"fs://localhost:0{adapter['base_path']}/" == env["LMCACHE_REMOTE_URL"]
        assert adapter["base_path"].startswith(f"/mnt/curvine/l2cache/{endpoint}.")
        seen.add(adapter["base_path"])
    assert len(seen) == 2


def test_an_inprocess_endpoint_loads_the_sealing_plugin_from_the_patch_env_alone(work: Path) -> None:
    """Two LMCache engines (two pods of one endpoint) configured by LMCache's environment loader from the
    operator's L1 settings and the patch's variables (cache.l2.integrity, the default): one stores, the
    other is served both chunks from the L2 through the chart's plugin; a chunk then changed in place is
    refused, logged and removed, and only the chunk before it is served."""
    mount = work / "l2"
    policy = rendered_policy("--set", f"cache.l2.mountPath={mount}")
    env = {**OPERATOR_L1_ENV, **applied_env(policy, "qwen2-7b")}
    assert "LMCACHE_REMOTE_URL" not in env
    # The patch mounts the chart's podscripts ConfigMap (files/podscripts) at PYTHONPATH.
    assert env.pop("PYTHONPATH") == "/opt/kvtier/podscripts"
    seed = env.pop("PYTHONHASHSEED")
    base = Path(json.loads(env["LMCACHE_EXTRA_CONFIG"])[f"{PLUGIN}base_path"])
    assert base.parent == mount and base.name.startswith("qwen2-7b.")
    pod = {
        "env": env,
        "pythonpath": [str(CHART / "files" / "podscripts")],
        "model_arg": "/opt/ml/model",  # the operator's model argument for every endpoint
        "served_model_name": "Qwen/Qwen2-7B-Instruct",
        "world_size": 1,
        "dtype": "bfloat16",
        "tokens": TOKENS,
        "kv_seed": 3,
        **TINY,
    }
    stored, clean = invariants.run_cases(
        [{**pod, "action": "store"}, {**pod, "action": "lookup"}], seed, work
    )
    assert stored["error"] is None and stored["stored_files"] == 2, stored
    assert clean["error"] is None and clean["retrieved_tokens"] == 512 and clean["data_ok"] is True, clean
    files = sorted(base.glob("*.data"), key=lambda p: p.stat().st_mtime_ns)
    assert [f.stat().st_size for f in files] == [CHUNK_BYTES, CHUNK_BYTES], "every file carries its trailer"

    data = bytearray(files[-1].read_bytes())  # a run of KV bytes inverted, size and header as written
    data[1028:1092] = bytes(b ^ 0xFF for b in data[1028:1092])
    files[-1].write_bytes(bytes(data))
    (found,), log = invariants.run_cases_logged([{**pod, "action": "lookup"}], seed, work)
    assert found["error"] is None and found["retrieved_tokens"] <= 256, found  # never the changed chunk
    if found["retrieved_tokens"]:
        assert found["data_ok"] is True, found
    assert "failed verification (mismatch), served as a miss and removed" in log
    assert len(list(base.glob("*.data"))) == 1, "the refused file is removed, so the next store heals it"


ADAPTER_PROBE = Path(__file__).parents[1] / "harness" / "engine" / "l2_adapter_probe.py"
ADAPTER_CHUNK = 64 * 1024  # the probe's chunk: KV only; a sealed file adds one page


def adapter_ops(work: Path, adapter: str, ops: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]], str]:
    """Run `ops` in one LMCache server process (the probe) whose L2 is `--l2-adapter adapter`, with the
    chart's podscripts ConfigMap (files/podscripts) on its PYTHONPATH as the patch mounts it: the adapter's
    class, one verdict per op, and what the process logged."""
    case = {"adapter": adapter, "pythonpath": [str(CHART / "files" / "podscripts")], "ops": ops}
    (verdict,), log = invariants.run_cases_logged([case], "0", work, ADAPTER_PROBE)
    return verdict["class"], verdict["results"], log


def test_the_multiprocess_sidecar_loads_the_sealed_adapter_and_refuses_a_changed_chunk(work: Path) -> None:
    """The sidecar's --l2-adapter as rendered (cache.l2.integrity, the default) goes through LMCache's own
    argument parser and factory, which import the chart's sealed adapter: a second server is served both
    chunks; a chunk changed in place is then refused, logged and removed, the other still served.
    LMCache's own fs adapter (integrity off) loads the same change as KV: the fault the seal closes."""
    mount = work / "mp"
    args = ("--set", "hyperpod.lmcache.mode=MultiProcess", "--set", f"cache.l2.mountPath={mount}")
    (sealed,) = by_endpoint(rendered_policy(*args), "adapter").values()
    (plain,) = by_endpoint(rendered_policy(*args, "--set", "cache.l2.integrity=false"), "adapter").values()
    results = {}
    for name, adapter in (("sealed", sealed), ("plain", plain)):
        base = Path(json.loads(adapter).get("adapter_params", json.loads(adapter))["base_path"])
        cls, (stored,), _ = adapter_ops(work, adapter, [{"op": "store", "seeds": [1, 2]}])
        assert stored == {"ok": True, "bytes": 2 * ADAPTER_CHUNK}, stored
        _, (clean,), _ = adapter_ops(work, adapter, [{"op": "load", "seeds": [1, 2]}])
        assert clean["loaded"] == [True, True] and clean["data_ok"] == [True, True], clean
        files = sorted(base.glob("*.data"))
        sizes = {f.stat().st_size for f in files}
        data = bytearray(files[1].read_bytes())  # a run of KV bytes inverted, size as written
        data[1028:1092] = bytes(b ^ 0xFF for b in data[1028:1092])
        files[1].write_bytes(bytes(data))
        _, (found,), log = adapter_ops(work, adapter, [{"op": "load", "seeds": [1, 2]}])
        results[name] = (cls, sizes, found, log, len(list(base.glob("*.data"))))
    cls, sizes, found, log, left = results["sealed"]
    assert cls == "KvtierSealedFSL2Adapter" and sizes == {ADAPTER_CHUNK + l2_integrity.PAGE_BYTES}
    assert sum(found["loaded"]) == 1 and all(
        ok for ok, loaded in zip(found["data_ok"], found["loaded"], strict=True) if loaded
    ), found
    assert "failed verification (mismatch), served as a miss and removed" in log
    assert left == 1, "the refused file is removed, so the next store heals it"
    cls, sizes, found, log, left = results["plain"]
    assert cls == "FSL2Adapter" and sizes == {ADAPTER_CHUNK}
    assert found["loaded"] == [True, True] and sorted(found["data_ok"]) == [False, True], found
    assert "failed verification" not in log and left == 2
