"""Bring the test cluster up, report on it, take it down (kwokctl's binary runtime underneath).

Every wait has a deadline, and a failure names the component that did not come up and its log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kvtier import waiting
from kvtier.cluster.common import binaries
from kvtier.cluster.common.rest import Rest
from kvtier.cluster.kwok import config as kwokconfig
from kvtier.cluster.kwok import nodes
from kvtier.errors import UserError
from kvtier.toolchain import versions

DEFAULT_NAME = "kvtier"
Progress = Callable[[str], None]


def stderr_progress(message: str) -> None:
    print(f"[cluster] {message}", file=sys.stderr, flush=True)


class ComponentError(UserError):
    """A control-plane component did not come up; the message points at its log."""

    def __init__(self, name: str, component: str, what: str) -> None:
        log = log_path(name, component)
        tail = waiting.tail(log, 15)
        super().__init__(
            f"{component} {what}; log: {log}"
            + (f"\n--- last lines of {log.name} ---\n{tail}" if tail else "")
        )
        self.component = component
        self.log = log


@dataclass(frozen=True)
class ClusterInfo:
    name: str
    kubeconfig: Path
    server: str
    version: str
    started: bool  # True when this call started the cluster, False when it reused a running one


def workdir(name: str) -> Path:
    """kwokctl's directory of the cluster ($KWOK_WORKDIR/clusters/<name>)."""
    return binaries.state_dir() / "clusters" / name


def kubeconfig_path(name: str) -> Path:
    return workdir(name) / "kubeconfig.yaml"


def log_path(name: str, component: str) -> Path:
    return workdir(name) / "logs" / f"{component}.log"


def rest(name: str = DEFAULT_NAME) -> Rest:
    """A JSON client for the cluster, authenticated as its admin."""
    return Rest.from_kubeconfig(kubeconfig_path(name))


def up(
    name: str = DEFAULT_NAME,
    timeout: float = 300,
    progress: Progress = stderr_progress,
    build: bool = False,
    runtime_config_extra: str = "",
    feature_gates_extra: str = "",
) -> ClusterInfo:
    """Start the cluster (or reuse a running one) and wait until nodes, scheduler and controllers work.

    With `build`, missing binaries are built first (once; they are cached by version).
    The extras add to the API server's --runtime-config / --feature-gates when this call starts it.
    """
    if build and binaries.missing():
        binaries.build(progress)
    tools = binaries.require()
    started = False
    try:
        if _ready(name):
            progress(f"reusing the running cluster {name!r}")
        else:
            if workdir(name).exists():
                progress(f"removing the stale cluster {name!r} left by an earlier run")
                _kwokctl(["delete", "cluster", "--name", name], progress, timeout=120)
            started = True
            _create(name, tools, timeout, progress, runtime_config_extra, feature_gates_extra)
        deadline = time.monotonic() + timeout
        _wait(name, "kube-apiserver", "is not ready (GET /readyz)", deadline, progress, lambda: _ready(name))
        api = rest(name)
        names = nodes.ensure(api)
        _wait(
            name,
            "kwok-controller",
            f"did not make the fake nodes Ready ({', '.join(names)})",
            deadline,
            progress,
            lambda: not nodes.not_ready(api, names),
        )
        _wait(
            name,
            "kube-controller-manager",
            "created no `default` ServiceAccount",
            deadline,
            progress,
            lambda: api.find("/api/v1/namespaces/default/serviceaccounts/default") is not None,
        )
        _wait(
            name,
            "kube-scheduler",
            "holds no leader lease in kube-system",
            deadline,
            progress,
            lambda: (
                api.find("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler")
                is not None
            ),
        )
        version = api.get("/version")["gitVersion"]
        server = api.host
        progress(f"cluster {name!r} ready: Kubernetes {version} at {server}, {len(names)} fake nodes")
    except Exception:
        if started:  # stop what we started; keep its folder, so the logs the error names stay readable
            _kwokctl(["stop", "cluster", "--name", name], progress, timeout=60, check=False)
        raise
    return ClusterInfo(name, kubeconfig_path(name), server, version, started)


def down(name: str = DEFAULT_NAME, progress: Progress = stderr_progress) -> bool:
    """Stop the cluster's processes and delete its directory; False when there was none."""
    if not workdir(name).exists():
        return False
    binaries.require()
    _kwokctl(["delete", "cluster", "--name", name], progress, timeout=120)
    return True


def status(name: str = DEFAULT_NAME) -> dict[str, object]:
    """What a person needs to know: does it exist, is the API server answering, which nodes are Ready."""
    info: dict[str, object] = {"name": name, "exists": workdir(name).exists(), "ready": False}
    if not info["exists"]:
        return info
    info["kubeconfig"] = str(kubeconfig_path(name))
    info["logs"] = str(workdir(name) / "logs")
    if _ready(name):
        api = rest(name)
        all_nodes = [node["metadata"]["name"] for node in api.get("/api/v1/nodes")["items"]]
        info.update(
            ready=True,
            server=api.host,
            version=api.get("/version")["gitVersion"],
            nodes=len(all_nodes),
            nodes_not_ready=nodes.not_ready(api, all_nodes),
        )
    return info


def _create(
    name: str,
    tools: dict[str, Path],
    timeout: float,
    progress: Progress,
    runtime_config_extra: str,
    feature_gates_extra: str,
) -> None:
    progress(f"starting cluster {name!r} (Kubernetes {versions()['KUBERNETES_VERSION']}, loopback only)")
    text = kwokconfig.render(tools, binaries.kubernetes_minor(), runtime_config_extra, feature_gates_extra)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="kwokctl-") as conf:
        conf.write(text)
        conf.flush()
        args = [
            "create",
            "cluster",
            "--name",
            name,
            "--runtime",
            "binary",
            "--config",
            conf.name,
            "--kubeconfig",
            "",
            "--timeout",
            f"{int(timeout)}s",
        ]
        code, output = _kwokctl(args, progress, timeout=timeout + 30, check=False, abort=lambda: _gone(name))
    if code != 0:
        raise _diagnose(name, f"`kwokctl create cluster` failed (exit {code}):\n{output[-2000:]}")


def _diagnose(name: str, what: str) -> UserError:
    """Name the first component whose process is gone, else point at the log folder."""
    dead = dead_components(name)
    if dead:
        return ComponentError(name, dead[0], "exited while the cluster was starting")
    return UserError(f"{what}\ncomponent logs: {workdir(name) / 'logs'}")


def _gone(name: str) -> str:
    dead = dead_components(name)
    return f"{', '.join(dead)} exited" if dead else ""


def dead_components(name: str) -> list[str]:
    """Components that were started (have a pid file) but whose process is no longer running."""
    dead = []
    for component in kwokconfig.COMPONENTS:
        pid_file = workdir(name) / "pids" / f"{component}.pid"
        try:
            pid = int(pid_file.read_text().strip())
        except (OSError, ValueError):
            continue
        if not Path(f"/proc/{pid}").exists() or _zombie(pid):
            dead.append(component)
    return dead


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _kwokctl(
    args: list[str],
    progress: Progress,
    timeout: float,
    check: bool = True,
    abort: Callable[[], str] | None = None,
) -> tuple[int, str]:
    """Run kwokctl with its working directory in our state folder; stream its lines as progress.

    `abort` is polled every second; a non-empty answer (the reason) stops kwokctl early.
    """
    env = {**os.environ, "KWOK_WORKDIR": str(binaries.state_dir())}
    command = [str(binaries.path("kwokctl")), *args]
    proc = subprocess.Popen(
        command,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []

    def pump() -> None:  # a reader thread, so a silent hang still meets the deadline below
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            progress(f"  kwokctl: {_brief(line)}")

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout
    while True:
        try:
            code = proc.wait(timeout=1)
            break
        except subprocess.TimeoutExpired:
            reason = (
                f"timed out after {timeout:.0f}s"
                if time.monotonic() > deadline
                else (abort() if abort else "")
            )
            if reason:  # kwokctl would keep waiting for a component that is already gone
                proc.kill()
                code = proc.wait()
                lines.append(f"(stopped: {reason})\n")
                break
    reader.join(timeout=5)
    output = "".join(lines)
    if check and code != 0:
        raise UserError(f"`kwokctl {' '.join(args)}` failed (exit {code}):\n{output[-2000:]}")
    return code, output


def _brief(line: str) -> str:
    """kwokctl logs JSON lines when not on a terminal: show the message and fields, not the source."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return line.rstrip()
    extras = {k: v for k, v in record.items() if k not in ("time", "level", "source", "msg")}
    elapsed = extras.pop("elapsed", None)
    if isinstance(elapsed, dict):
        extras["elapsed"] = elapsed.get("human")
    return f"{record.get('level', '')} {record.get('msg', '')} {extras if extras else ''}".strip()


def running(name: str = DEFAULT_NAME) -> bool:
    """Whether the cluster's API server answers /readyz now."""
    return _ready(name)


def _ready(name: str) -> bool:
    """True when the cluster's API server answers /readyz with ok."""
    if not kubeconfig_path(name).exists():
        return False
    try:
        return str(rest(name).request("GET", "/readyz", timeout=5)).strip() == "ok"
    except Exception:  # any failure to answer means "not ready"
        return False


def _wait(
    name: str, component: str, what: str, deadline: float, progress: Progress, check: Callable[[], bool]
) -> None:
    progress(f"waiting for {component}")
    waiting.wait_until(
        check,
        deadline=deadline,
        abort=lambda last: (
            ComponentError(name, component, "exited while starting" + last)
            if component in dead_components(name)
            else None
        ),
        fail=lambda last: ComponentError(name, component, what + last),
        tolerate=(Exception,),  # transient API errors while starting
        interval=1,
    )
