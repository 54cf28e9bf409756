"""Curvine as the charts run it (issue 23), in every environment: the CSI controller creates the L2
directories as the engines' UID/GID, the FUSE clients load the chart's config, masters and workers run
curvine-server as PID 1, and test-workers reads the worker DaemonSet with its own narrow Role.

Facts from CurvineIO/curvine v0.4.1: curvine-csi/pkg/csi/fuse_manager.go starts
/opt/curvine/curvine-fuse without --conf, and curvine-fuse/src/cli/mount_args.rs defaults --conf to the
relative conf/curvine-cluster.toml; the CSI image's WORKDIR is /opt/curvine (curvine-csi/Dockerfile).
curvine-cli/src/cmds/fs/mkdir.rs + common.rs record the process's UID/GID and 0777 & ~[client] umask.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from render import find, helm_bin, render, render_docs

from kvtier import helm, paths
from kvtier.upstream import curvine_config

UMBRELLA = paths.CHARTS / "kv-tiered-inference"
# Environments that run Curvine (values/cpu.yaml brings its own RWX claim instead).
ENVS = [
    e
    for e in sorted(paths.VALUES.glob("*.yaml"))
    if ((yaml.safe_load(e.read_text()) or {}).get("curvine") or {}).get("enabled", True)
]
CONF = "/opt/curvine/conf/curvine-cluster.toml"


@pytest.fixture(autouse=True)
def _deps(need) -> None:
    need(helm_bin(3).exists(), "pinned Helm 3 not built (make tools)")
    helm.build_dependencies(UMBRELLA)


def _container(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in doc["spec"]["template"]["spec"]["containers"] if c["name"] == name)


def _config(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [cm] = [d for d in find(docs, "ConfigMap") if "curvine-cluster.toml" in d.get("data", {})]
    return tomllib.loads(cm["data"]["curvine-cluster.toml"])


def _named(docs: list[dict[str, Any]], kind: str, suffix: str) -> dict[str, Any]:
    [doc] = [d for d in find(docs, kind) if d["metadata"]["name"].endswith(suffix)]
    return doc


@pytest.mark.parametrize("env", ENVS, ids=[e.stem for e in ENVS])
def test_engines_own_the_l2_directories(env: Path) -> None:
    docs = render_docs(UMBRELLA, values=[env])
    values = yaml.safe_load(env.read_text()) or {}
    engine = {
        **{"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000},
        **values.get("engine", {}).get("podSecurityContext", {}),
    }
    controller = _named(docs, "Deployment", "-csi-controller")
    pod = controller["spec"]["template"]["spec"]["securityContext"]
    assert pod["runAsUser"] == engine["runAsUser"]
    assert pod["runAsGroup"] in (engine["fsGroup"], engine["runAsGroup"])
    plugin = _container(controller, "csi-plugin")
    assert {"name": "CURVINE_CONF_FILE", "value": CONF} in plugin["env"]
    assert {"name": "config", "mountPath": "/opt/curvine/conf", "readOnly": True} in plugin["volumeMounts"]
    # 0775: the owner and the engines' group write, other UIDs do not.
    assert _config(docs)["client"]["umask"] == 0o002
    # The eviction CronJob deletes chunks in the same directory: same identity as the engines.
    for job in find(docs, "CronJob"):
        assert (
            job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
            == (engine["runAsUser"])
        )


@pytest.mark.parametrize("env", ENVS, ids=[e.stem for e in ENVS])
def test_fuse_clients_load_the_rendered_config(env: Path) -> None:
    docs = render_docs(UMBRELLA, values=[env])
    node = _named(docs, "DaemonSet", "-csi-node")
    plugin = _container(node, "csi-plugin")
    mount = next(m for m in plugin["volumeMounts"] if m["name"] == "config")
    # curvine-fuse resolves conf/curvine-cluster.toml against the plugin's working directory.
    assert str(Path(plugin["workingDir"]) / "conf" / "curvine-cluster.toml") == CONF
    assert mount["mountPath"] == str(Path(CONF).parent) and "subPath" not in mount
    config = _config(docs)
    assert config["fuse"]["log"]["level"] == config["log"]["level"]
    assert config["cli"]["log"]["level"] == config["log"]["level"]
    port = {p["name"]: p["containerPort"] for p in plugin["ports"]}["fuse-web"]
    assert port == config["fuse"]["web_port"]


@pytest.mark.parametrize("env", ENVS, ids=[e.stem for e in ENVS])
def test_cli_output_is_not_mixed_with_its_logs(env: Path) -> None:
    """curvine-cli prints what a command returns (`fs cat`'s bytes, `report`) on stdout and logs through
    `[cli.log]`, whose log_dir defaults to stdout too: on the real v0.4.1 with chart 0.2.1's render, INFO
    lines came before a file's bytes (charts/curvine/README.md), so `cv fs cat F > copy` made a wrong copy."""
    config = _config(render_docs(UMBRELLA, values=[env]))
    assert curvine_config.log_destination(config["cli"]["log"]) == "stderr", config["cli"]["log"]
    assert curvine_config.log_destination(config["fuse"]["log"]) == "stdout", "FUSE logs stay container logs"


@pytest.mark.parametrize("env", ENVS, ids=[e.stem for e in ENVS])
def test_servers_are_pid_1(env: Path) -> None:
    docs = render_docs(UMBRELLA, values=[env])
    for kind, suffix, service in (("StatefulSet", "-master", "master"), ("DaemonSet", "-worker", "worker")):
        server = _named(docs, kind, suffix)["spec"]["template"]["spec"]["containers"][0]
        assert server["command"] == ["/app/curvine/lib/curvine-server"]
        assert server["args"] == ["--service", service, "--conf", "/app/curvine/conf/curvine-cluster.toml"]


@pytest.mark.parametrize("env", ENVS, ids=[e.stem for e in ENVS])
def test_workers_check_has_its_own_narrow_role(env: Path) -> None:
    docs = render_docs(UMBRELLA, values=[env])
    worker = _named(docs, "DaemonSet", "-worker")["metadata"]["name"]
    role = _named(docs, "Role", "-test-workers")
    assert role["rules"] == [
        {"apiGroups": ["apps"], "resources": ["daemonsets"], "resourceNames": [worker], "verbs": ["get"]}
    ]
    binding = _named(docs, "RoleBinding", "-test-workers")
    account = _named(docs, "ServiceAccount", "-test-workers")["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": "kv"}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


@pytest.mark.parametrize(
    ("engine", "access", "refused"),
    [
        ({"runAsUser": 2000, "runAsGroup": 2000, "fsGroup": 2000}, {}, True),
        ({"runAsUser": 2000, "runAsGroup": 2000, "fsGroup": 1000}, {}, False),  # shares the volume group
        ({"runAsUser": 2000}, {"mode": "owner"}, True),
        ({"runAsUser": 2000, "runAsGroup": 2000, "fsGroup": 2000}, {"mode": "world"}, False),
        ({"runAsUser": 2000, "runAsGroup": 2000, "fsGroup": 2000}, {"uid": 2000, "gid": 2000}, False),
    ],
)
def test_umbrella_refuses_engines_that_could_not_write(
    engine: dict[str, int], access: dict[str, Any], refused: bool
) -> None:
    sets: dict[str, Any] = {f"engine.podSecurityContext.{k}": v for k, v in engine.items()}
    sets |= {f"curvine.csi.volumeAccess.{k}": v for k, v in access.items()}
    result = render(UMBRELLA, set_values=sets)
    assert (result.returncode != 0) == refused, result.stderr
    if refused:
        assert "cannot write the L2" in result.stderr and "curvine.csi.volumeAccess" in result.stderr
