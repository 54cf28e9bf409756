"""The HyperPod L2 patch's settings, judged by the pinned LMCache itself (engine venv): the environment the
patch gives an InProcess endpoint through LMCache's own environment loader, and the MultiProcess
sidecar's --l2-adapter through the LMCache server's own argument parser. The patch itself runs on the
real API server in tests/cluster/test_hyperpod_patch.py; here only what it writes is read back from
the render."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
import yaml

from harness.hyperpod_patch import by_endpoint
from kvtier import helm, paths
from kvtier.engine_rig import rig as engine_rig
from kvtier.engine_rig.errors import RigError

CHART = paths.CHARTS / "kv-tiered-inference"
ENV = paths.VALUES / "hyperpod-g6e-4xlarge.yaml"

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


def patch_env(policy: dict[str, Any], endpoint: str) -> dict[str, str]:
    """The variables the patch sets on the endpoint's cache container (its ApplyConfiguration)."""
    (apply,) = [m for m in policy["spec"]["mutations"] if m["patchType"] == "ApplyConfiguration"]
    env = {"LMCACHE_REMOTE_URL": by_endpoint(policy, "l2url")[endpoint]}
    for entry in apply["applyConfiguration"]["expression"].split("env{name: ")[1:]:
        name, value = entry.split(", value: ", 1)
        if not value.startswith("variables."):
            env[json.loads(name)] = json.loads(value.split("}", 1)[0])
    return env


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
    inprocess = rendered_policy(*models)
    multiprocess = rendered_policy(*models, "--set", "hyperpod.lmcache.mode=MultiProcess")
    adapters = by_endpoint(multiprocess, "adapter")
    seen = set()
    for endpoint in ("qwen2-7b", "llama"):
        env = patch_env(inprocess, endpoint)
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
