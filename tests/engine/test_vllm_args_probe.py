"""vLLM's own verdict on the engine args the chart renders (engine_rig/vllm_args_probe.py): the parser
`vllm serve` builds and the checks the serve path runs before it needs the model's config.json, all in one
engine-venv process. The renders of values/cpu.yaml, values/prod-g6e-4xlarge.yaml and (vLLM's native
offloading, parsed down to its tiers by vLLM's own config builder and factories)
values/prod-native-g6e-4xlarge.yaml must pass; broken variants of the CPU render (what a user's extraArgs
could add) and of the native render must be refused, naming the flag.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvtier import helm, paths
from kvtier.engine_rig import rig

CHART = paths.CHARTS / "kv-tiered-inference"
PROBE = Path(rig.__file__).with_name("vllm_args_probe.py")
NATIVE = "prod-native-g6e-4xlarge"
ENVIRONMENTS = {"cpu": "cpu.yaml", "prod-g6e-4xlarge": "prod-g6e-4xlarge.yaml", NATIVE: f"{NATIVE}.yaml"}
EXPECTED = {  # what the values files say, as vLLM should have parsed it
    "cpu": {"dtype": "bfloat16", "max_model_len": 4096},
    "prod-g6e-4xlarge": {"dtype": "float16", "max_model_len": 8192},
    NATIVE: {"dtype": "float16", "max_model_len": 8192},
}

Edit = Callable[[list[str]], list[str]]


def with_flag(args: list[str], flag: str, value: str | None = None) -> list[str]:
    """args with flag set to value: replaced where the render has it, appended where not."""
    if value is not None and flag in args:
        at = args.index(flag)
        return [*args[: at + 1], value, *args[at + 2 :]]
    return [*args, flag, *([value] if value is not None else [])]


def with_transfer(change: Callable[[dict[str, Any]], Any]) -> Edit:
    """An edit of the rendered --kv-transfer-config JSON; a str result replaces the whole value."""

    def edit(args: list[str]) -> list[str]:
        changed = change(json.loads(args[args.index("--kv-transfer-config") + 1]))
        return with_flag(
            args, "--kv-transfer-config", changed if isinstance(changed, str) else json.dumps(changed)
        )

    return edit


# name: (edit of the CPU render, the flag vLLM must name, the probe's stage that refuses it)
REFUSED: dict[str, tuple[Edit, str, str]] = {
    "unknown flag": (lambda a: with_flag(a, "--no-such-flag", "1"), "--no-such-flag", "argparse"),
    "ambiguous prefix": (lambda a: with_flag(a, "--max", "3"), "--max", "argparse"),
    "bad choice": (lambda a: with_flag(a, "--kv-cache-dtype", "bogus"), "--kv-cache-dtype", "argparse"),
    "bad dtype": (lambda a: with_flag(a, "--dtype", "bfloat"), "--dtype", "argparse"),
    "non-integer": (
        lambda a: with_flag(a, "--tensor-parallel-size", "one"),
        "--tensor-parallel-size",
        "argparse",
    ),
    "non-integer length": (lambda a: with_flag(a, "--max-model-len", "long"), "--max-model-len", "argparse"),
    "bad kv-transfer JSON": (with_transfer(lambda c: json.dumps(c)[:-1]), "--kv-transfer-config", "argparse"),
    "unknown kv_role": (
        with_transfer(lambda c: {**c, "kv_role": "both"}),
        "--kv-transfer-config",
        "argparse",
    ),
    "unknown kv_load_failure_policy": (
        with_transfer(lambda c: {**c, "kv_load_failure_policy": "retry"}),
        "--kv-transfer-config",
        "argparse",
    ),
    "connector without kv_role": (
        with_transfer(lambda c: {k: v for k, v in c.items() if k != "kv_role"}),
        "--kv-transfer-config",
        "argparse",
    ),
    "unknown kv-transfer key": (
        with_transfer(lambda c: {**c, "chunk_size": 256}),
        "--kv-transfer-config",
        "argparse",
    ),
    "unknown connector": (
        with_transfer(lambda c: {**c, "kv_connector": "LMCacheConnectorV2"}),
        "--kv-transfer-config",
        "kv-connector",
    ),
    "auto tool choice without a parser": (
        lambda a: with_flag(a, "--enable-auto-tool-choice"),
        "--enable-auto-tool-choice",
        "serve-validate",
    ),
    "negative max model len": (
        lambda a: with_flag(a, "--max-model-len", "-2"),
        "--max-model-len",
        "model-fields",
    ),
    "block size 0": (lambda a: with_flag(a, "--block-size", "0"), "--block-size", "cache"),
    "memory utilization above 1": (
        lambda a: with_flag(a, "--gpu-memory-utilization", "1.5"),
        "--gpu-memory-utilization",
        "cache",
    ),
    "tensor parallel 0": (
        lambda a: with_flag(a, "--tensor-parallel-size", "0"),
        "--tensor-parallel-size",
        "parallel",
    ),
    "tensor parallel 0, short flag": (
        lambda a: with_flag(a, "-tp", "0"),
        "--tensor-parallel-size",
        "parallel",
    ),
    "pipeline parallel 0": (
        lambda a: with_flag(a, "--pipeline-parallel-size", "0"),
        "--pipeline-parallel-size",
        "parallel",
    ),
    "data-parallel RPC port out of range": (
        lambda a: with_flag(a, "--data-parallel-rpc-port", "70000"),
        "--data-parallel-rpc-port",
        "parallel",
    ),
    "unknown executor backend": (
        lambda a: with_flag(a, "--distributed-executor-backend", "threads"),
        "--distributed-executor-backend",
        "executor",
    ),
    "max num seqs 0": (lambda a: with_flag(a, "--max-num-seqs", "0"), "--max-num-seqs", "scheduler-fields"),
}


def with_offloading(change: Callable[[dict[str, Any]], None]) -> Edit:
    """An edit of the native render's kv_connector_extra_config (changed in place)."""

    def edit_config(config: dict[str, Any]) -> dict[str, Any]:
        change(config["kv_connector_extra_config"])
        return config

    return with_transfer(edit_config)


def _first_tier(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    return lambda extra: change(extra["secondary_tiers"][0])


# name: (edit of the native render, the flag vLLM must name, the probe's stage that refuses it)
NATIVE_REFUSED: dict[str, tuple[Edit, str, str]] = {
    "chunk not a multiple of the block": (
        with_offloading(lambda e: e.update(block_size=200)),
        "--kv-transfer-config",
        "kv-offloading",
    ),
    "block_size and blocks_per_chunk": (
        with_offloading(lambda e: e.update(blocks_per_chunk=16)),
        "--kv-transfer-config",
        "kv-offloading",
    ),
    "no CPU tier size": (
        with_offloading(lambda e: e.pop("cpu_bytes_to_use")),
        "--kv-transfer-config",
        "kv-offloading",
    ),
    "unknown spec": (
        with_offloading(lambda e: e.update(spec_name="TieredOffloadingSpec")),
        "--kv-transfer-config",
        "kv-offloading",
    ),
    "unknown tier type": (
        with_offloading(_first_tier(lambda t: t.update(type="nfs"))),
        "--kv-transfer-config",
        "kv-offloading",
    ),
    "unknown fs tier key": (
        with_offloading(_first_tier(lambda t: t.update(max_bytes=1 << 40))),
        "--kv-transfer-config",
        "kv-offloading",
    ),
    "fs tier without root_dir": (
        with_offloading(_first_tier(lambda t: t.pop("root_dir"))),
        "--kv-transfer-config",
        "kv-offloading",
    ),
    "tiers not a list": (
        with_offloading(lambda e: e.update(secondary_tiers={"type": "fs"})),
        "--kv-transfer-config",
        "kv-offloading",
    ),
    "LMCache's hash name": (
        lambda a: with_flag(a, "--prefix-caching-hash-algo", "builtin"),
        "--prefix-caching-hash-algo",
        "argparse",
    ),
}

# Wrong (for this model or this platform), but only the model's config.json, the platform or the pod can tell,
# so vLLM accepts them this far: tensor parallel against the heads and max_model_len against the model's are
# checked with the config.json; vLLM CPU only warns about a block size that is not a multiple of 32 when it
# builds its config, and its worker refuses it once the model is loaded ("No common block size for 48
# (CPU_ATTN: [MultipleOf(32)])"); the port is checked when the server binds it.
ACCEPTED_THIS_FAR: dict[str, Edit] = {
    "block size 7": lambda a: with_flag(a, "--block-size", "7"),
    "port 99999": lambda a: with_flag(a, "--port", "99999"),
    "max model len past the model's": lambda a: with_flag(a, "--max-model-len", "1000000"),
    "tensor parallel 3": lambda a: with_flag(a, "--tensor-parallel-size", "3"),
}


def rendered_engine_args(values_file: str) -> list[list[str]]:
    """The vllm container args of every engine Deployment the chart renders for a values file."""
    helm.build_dependencies(CHART)
    result = helm.run(
        ["template", "kv", str(CHART), "--values", str(paths.VALUES / values_file)], timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    engines = [
        d
        for d in yaml.safe_load_all(result.stdout)
        if d
        and d["kind"] == "Deployment"
        and d["metadata"]["labels"].get("app.kubernetes.io/component") == "engine"
    ]
    found = []
    for engine in engines:
        container = next(c for c in engine["spec"]["template"]["spec"]["containers"] if c["name"] == "vllm")
        assert container["command"] == ["vllm"], container["command"]
        found.append([str(a) for a in container["args"]])
    assert found, f"{values_file}: no engine Deployment rendered"
    return found


@pytest.fixture(scope="module")
def verdicts(work: Path, run_probe, need) -> dict[str, list[dict[str, Any]]]:
    """Every case's verdict by name (one per engine Deployment for the renders), from one probe process."""
    need((paths.TOOLS_BIN / "helm3").exists(), "pinned helm3 not built (make tools)")
    renders = {name: rendered_engine_args(file) for name, file in ENVIRONMENTS.items()}
    base = renders["cpu"][0]
    cases = dict(renders)
    cases.update({name: [edit(base)] for name, (edit, _, _) in REFUSED.items()})
    cases.update({name: [edit(renders[NATIVE][0])] for name, (edit, _, _) in NATIVE_REFUSED.items()})
    cases.update({name: [edit(base)] for name, edit in ACCEPTED_THIS_FAR.items()})
    flat = [argv for argvs in cases.values() for argv in argvs]
    request = work / "cases.json"
    request.write_text(json.dumps(flat))
    proc = run_probe(PROBE, request)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and len(lines) == len(flat), (
        f"probe exit {proc.returncode}:\n{proc.stderr[-3000:]}"
    )
    found = iter(lines)
    return {name: [next(found) for _ in argvs] for name, argvs in cases.items()}


@pytest.mark.parametrize("environment", sorted(ENVIRONMENTS))
def test_vllm_accepts_the_rendered_args(verdicts: dict[str, list[dict[str, Any]]], environment: str) -> None:
    for verdict in verdicts[environment]:
        assert verdict["ok"], verdict
        parsed = verdict["parsed"]
        assert {k: parsed[k] for k in EXPECTED[environment]} == EXPECTED[environment]
        assert parsed["served_model_name"] == [parsed["model"]]
        assert (parsed["tensor_parallel_size"], parsed["port"], parsed["enable_prefix_caching"]) == (
            1,
            8000,
            True,
        )
        assert parsed["block_size"] is None  # left to the platform (vLLM CPU: 128)
        transfer = parsed["kv_transfer_config"]
        assert transfer["kv_role"] == "kv_both" and transfer["kv_load_failure_policy"] == "recompute"
        if environment != NATIVE:
            # LMCache's connector with the request's cache_salt in its keys (cache.tenantIsolation)
            assert (transfer["kv_connector"], transfer["kv_connector_module_path"]) == (
                "SaltTaggedLMCacheConnectorV1",
                "tenant_salt",
            )
            continue
        extra = transfer["kv_connector_extra_config"]
        assert transfer["kv_connector"] == "OffloadingConnector" and transfer["engine_id"] == "$(POD_NAME)"
        assert (extra["spec_name"], extra["block_size"]) == ("TieringOffloadingSpec", 256)
        assert extra["cpu_bytes_to_use"] == 86 * 2**30  # L1 auto: 110Gi - 8Gi /dev/shm - 16Gi headroom
        [tier] = extra["secondary_tiers"]
        # cache.l2.integrity (the default): the chart's sealed fs tier, resolved and bound by vLLM's factory
        assert (tier["type"], tier["module_path"]) == ("KvtierSealedFsTier", "l2_native"), tier
        assert tier["root_dir"].startswith("/mnt/curvine/l2cache/qwen2-7b."), tier


@pytest.mark.parametrize("name", sorted({**REFUSED, **NATIVE_REFUSED}))
def test_vllm_refuses_a_broken_variant(verdicts: dict[str, list[dict[str, Any]]], name: str) -> None:
    (verdict,) = verdicts[name]
    _, flag, stage = {**REFUSED, **NATIVE_REFUSED}[name]
    assert not verdict["ok"], verdict
    assert (verdict["flag"], verdict["stage"]) == (flag, stage), verdict
    assert verdict["error"]


@pytest.mark.parametrize("name", sorted(ACCEPTED_THIS_FAR))
def test_what_only_the_model_or_the_pod_refuses(verdicts: dict[str, list[dict[str, Any]]], name: str) -> None:
    (verdict,) = verdicts[name]
    assert verdict["ok"], verdict
