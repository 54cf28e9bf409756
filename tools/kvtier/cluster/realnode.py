"""The real-node flavour of the test cluster: pods run real processes (`kvtier cluster up --runtime real`).

etcd, the control plane, containerd, the kubelet and kube-proxy run inside a network namespace of their
own (kvtier.cluster.netns) and a private mount namespace, all in one cgroup subtree below this process's
own. CoreDNS runs as a pod. `down` kills every process of that subtree (only what `up` started), removes
the cgroups, the namespace and the folder, and writes back the global sysctls the kubelet changed, so the
machine is as it was (kvtier.cluster.machine).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kvtier.cluster import binaries, images, kwokconfig, machine, netns, nodebins, pki, realconfig
from kvtier.cluster.rest import Rest
from kvtier.errors import UserError

Progress = Callable[[str], None]
CGROUP_ROOT = Path("/sys/fs/cgroup")
# cgroup v1 hierarchies the daemons and pods are placed in (those mounted here; the kubelet wants all,
# the named systemd one too).
CONTROLLERS = ["cpu", "cpuacct", "cpuset", "memory", "pids", "blkio", "devices", "freezer", "systemd"]
DAEMONS = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "containerd",
    "kubelet",
    "kube-proxy",
]
# Inside the private mount namespace only: paths the kubelet, containerd and the CNI plugins write to
# that no option moves (/var/log/containers, /run/containerd/s, /var/run/netns, /var/lib/cni).
DEFAULT_SERVICE_ACCOUNT = "/api/v1/namespaces/default/serviceaccounts/default"
PRIVATE_TMPFS = ["/run", "/var/log", "/var/lib"]


@dataclass(frozen=True)
class RealCluster:
    name: str
    kubeconfig: Path
    namespace: str  # the network namespace
    server: str
    version: str
    images: dict[str, str]  # image name -> reference in containerd
    started: bool

    def command(self, argv: list[str]) -> list[str]:
        """argv run as a client inside the cluster's network namespace."""
        return netns.command(self.namespace, argv)


def clusters_dir() -> Path:
    return binaries.cache_dir() / "real-clusters"


def layout(name: str) -> realconfig.Layout:
    return realconfig.Layout(clusters_dir() / name)


def exists(name: str) -> bool:
    return (layout(name).root / "state.json").exists()


def preconditions() -> list[str]:
    """Why this machine cannot run a real node (empty when it can)."""
    reasons = []
    if os.geteuid() != 0:
        reasons.append("needs root (network namespaces, mounts, cgroups)")
    absent = nodebins.absent_host_commands()
    if absent:
        reasons.append(f"commands not found: {', '.join(absent)}")
    if not (CGROUP_ROOT / "memory" / "cgroup.procs").exists():
        reasons.append("needs cgroup v1 controllers under /sys/fs/cgroup (memory, cpu, pids, ...)")
    return reasons


def _own_cgroup() -> str:
    """This process's memory cgroup: the cluster nests below it, inside whatever limits apply to us."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return path.rstrip("/")
    return ""


def _controllers() -> list[str]:
    return [c for c in CONTROLLERS if (CGROUP_ROOT / c / "cgroup.procs").exists()]


def _make_cgroups(relative: str) -> list[str]:
    """Create `relative` in every controller; the folders created, outermost first."""
    created = []
    for controller in _controllers():
        path = CGROUP_ROOT / controller
        for part in relative.strip("/").split("/"):
            parent, path = path, path / part
            if not path.exists():
                path.mkdir()
                created.append(str(path))
                if controller == "cpuset":  # a new cpuset has no CPUs until given its parent's
                    for knob in ("cpuset.cpus", "cpuset.mems"):
                        (path / knob).write_text((parent / knob).read_text())
    return created


def _subtrees(relative: str, created: list[str]) -> list[Path]:
    """The cluster's cgroup folder in every hierarchy (runc also writes to the unified one), then the
    parents `up` created, innermost first."""
    trees = [h / relative.strip("/") for h in sorted(CGROUP_ROOT.iterdir()) if h.is_dir()]
    return [t for t in trees if t.is_dir()] + [Path(c) for c in reversed(created) if Path(c).is_dir()]


def _cgroup_pids(trees: list[Path]) -> set[int]:
    pids: set[int] = set()
    for tree in trees:
        for procs in tree.rglob("cgroup.procs") if tree.exists() else []:
            try:
                pids |= {int(pid) for pid in procs.read_text().split()}
            except OSError:
                continue
    return pids


def _remove_cgroups(trees: list[Path]) -> list[str]:
    """rmdir each tree, deepest folders first; the folders that are left."""
    for tree in trees:
        if tree.exists():
            for folder in sorted((p for p in tree.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                with contextlib.suppress(OSError):
                    folder.rmdir()
            with contextlib.suppress(OSError):
                tree.rmdir()
    return [str(tree) for tree in trees if tree.exists()]


def _join(procs_files: list[Path]) -> Callable[[], None]:
    def join() -> None:  # runs in the child between fork and exec
        os.setsid()
        for procs in procs_files:
            procs.write_text(f"{os.getpid()}\n")

    return join


def _state(name: str) -> dict[str, object]:
    try:
        return dict(json.loads((layout(name).root / "state.json").read_text()))
    except (OSError, json.JSONDecodeError):
        return {}


def _save_state(name: str, state: dict[str, object]) -> None:
    path = layout(name).root / "state.json"
    path.write_text(json.dumps(state, indent=2) + "\n")


class Starter:
    """Starts the cluster's processes in its namespaces and cgroup; each logs to logs/<name>.log."""

    def __init__(self, name: str, progress: Progress) -> None:
        self.name = name
        self.layout = layout(name)
        self.progress = progress
        self.namespace = netns.name_for(name)
        self.daemon_cgroup = f"{_own_cgroup()}/kvtier-{name}/daemons"
        self.pod_cgroup_root = f"{_own_cgroup()}/kvtier-{name}"
        self.procs = [
            CGROUP_ROOT / c / self.daemon_cgroup.strip("/") / "cgroup.procs" for c in _controllers()
        ]
        self.holder = 0
        self.pids: dict[str, int] = {}

    def log(self, component: str) -> Path:
        return self.layout.logs / f"{component}.log"

    def start_holder(self) -> int:
        """A process that owns the private mount namespace the daemons join."""
        mounts = "; ".join(f"mount -t tmpfs -o mode=0755 kvtier {path}" for path in PRIVATE_TMPFS)
        # The daemons see a resolver-less resolv.conf: no lookup is even tried outside the namespace.
        resolv = f"mount --bind {self.layout.root / 'resolv.conf'} /etc/resolv.conf"
        script = f"set -e; {mounts}; {resolv}; echo ready; exec sleep infinity"
        # Not `ip netns exec`: it mounts a fresh /sys, which hides the cgroup mounts from the kubelet.
        enter = [
            "nsenter",
            f"--net={netns.NETNS_DIR / self.namespace}",
            "unshare",
            "--mount",
            "--propagation=slave",
        ]
        with self.log("holder").open("w") as log:  # the child keeps its own copy of the descriptor
            proc = subprocess.Popen(
                [*enter, "sh", "-c", script],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                preexec_fn=_join(self.procs),
                text=True,
            )
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise UserError(f"the namespace holder did not start; log: {self.log('holder')}")
        proc.stdout.close()
        self.holder = proc.pid
        return proc.pid

    def start(self, component: str, argv: list[str], env: dict[str, str] | None = None) -> int:
        inside = ["nsenter", f"--target={self.holder}", "--net", "--mount", "--", *argv]
        with self.log(component).open("w") as log:
            proc = subprocess.Popen(
                inside,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **nodebins.environment(), **(env or {})},
                preexec_fn=_join(self.procs),
            )
        self.pids[component] = proc.pid
        return proc.pid

    def dead(self) -> list[str]:
        return [c for c, pid in self.pids.items() if not _running(pid)]


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def up(name: str, timeout: float = 300, progress: Progress = print, build: bool = False) -> RealCluster:
    """Start the real-node cluster `name` (or reuse it when it is running) and wait until it serves pods."""
    reasons = preconditions()
    if reasons:
        raise UserError("cannot run a real node here: " + "; ".join(reasons))
    if build and nodebins.missing():
        nodebins.build(progress)
    tools = nodebins.require()
    if exists(name):
        running = _state(name)
        if _healthy(name, running):
            progress(f"reusing the running real-node cluster {name!r}")
            return _info(name, running, started=False)
        progress(f"removing the stale real-node cluster {name!r} left by an earlier run")
        down(name, progress)
    wanted = images.all_images(progress)
    starter = Starter(name, progress)
    root = starter.layout.root
    root.mkdir(parents=True, exist_ok=True)
    for folder in ("logs", "etcd", "containerd", "kubelet", "pod-logs", "cni/net.d", "cni/ipam"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    state: dict[str, object] = {"namespace": starter.namespace, "images": {i.name: i.ref for i in wanted}}
    machine.record(root / "sysctls-before.json")
    _save_state(name, state)
    try:
        netns.create(starter.namespace)
        state["cgroups"] = _make_cgroups(starter.daemon_cgroup)
        state["cgroup_root"] = starter.pod_cgroup_root
        _save_state(name, state)
        (root / "resolv.conf").write_text("# no upstream resolver: nothing may leave the namespace\n")
        state["holder"] = starter.start_holder()
        _save_state(name, state)
        _start_all(starter, tools, wanted, timeout)
        state["pids"] = starter.pids
        _save_state(name, state)
    except BaseException:
        if os.environ.get("KVTIER_DEBUG_KEEP"):
            raise
        down(name, progress, keep_logs=True)
        raise
    info = _info(name, state, started=True)
    progress(
        f"real-node cluster {name!r} ready: Kubernetes {info.version} at {info.server}"
        f" (netns {info.namespace})"
    )
    return info


def _start_all(starter: Starter, tools: dict[str, Path], wanted: list[images.Image], timeout: float) -> None:
    lay, progress = starter.layout, starter.progress
    deadline = time.monotonic() + timeout
    pki.create(lay.pki)
    lay.kubeconfig.write_text(realconfig.kubeconfig(lay))
    refs = {image.name: image.ref for image in wanted}
    (lay.root / "containerd.toml").write_text(
        realconfig.containerd(lay, tools["runc"], tools["cni-bridge"].parent, refs["pause"])
    )
    (lay.cni / "net.d" / "10-kvtier.conflist").write_text(realconfig.cni(lay))
    (lay.root / "kubelet.yaml").write_text(realconfig.kubelet(lay, starter.pod_cgroup_root))
    (lay.root / "kube-proxy.yaml").write_text(realconfig.kube_proxy(lay))
    pki_dir, kubeconfig = lay.pki, str(lay.kubeconfig)
    progress("starting etcd and the control plane")
    starter.start("etcd", [
        str(tools["etcd"]), "--data-dir", str(lay.etcd), "--unsafe-no-fsync",
        "--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
        "--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
        "--initial-cluster", "default=http://127.0.0.1:2380", "--listen-metrics-urls", "",
    ])  # fmt: skip
    runtime_config, feature_gates = kwokconfig.admission_policy_switches(binaries.kubernetes_minor())
    starter.start("kube-apiserver", [
        str(tools["kube-apiserver"]), "--etcd-servers", "http://127.0.0.1:2379",
        "--bind-address", "0.0.0.0", "--secure-port", str(realconfig.API_PORT),
        "--advertise-address", netns.NODE_IP, "--service-cluster-ip-range", netns.SERVICE_CIDR,
        "--client-ca-file", str(pki_dir / "ca.crt"),
        "--tls-cert-file", str(pki_dir / "apiserver.crt"),
        "--tls-private-key-file", str(pki_dir / "apiserver.key"),
        "--kubelet-client-certificate", str(pki_dir / "admin.crt"),
        "--kubelet-client-key", str(pki_dir / "admin.key"),
        # The node's name resolves nowhere (no resolver in the namespace): dial its address.
        "--kubelet-preferred-address-types", "InternalIP",
        "--service-account-issuer", f"https://kubernetes.default.svc.{realconfig.CLUSTER_DOMAIN}",
        "--service-account-key-file", str(pki_dir / "sa.pub"),
        "--service-account-signing-key-file", str(pki_dir / "sa.key"),
        "--authorization-mode", "Node,RBAC", "--allow-privileged=true",
        "--runtime-config", runtime_config, *([f"--feature-gates={feature_gates}"] if feature_gates else []),
    ])  # fmt: skip
    _wait(starter, "kube-apiserver", "is not ready (GET /readyz)", deadline, lambda: _readyz(starter.name))
    for component in ("kube-controller-manager", "kube-scheduler"):
        extra = (
            ["--service-account-private-key-file", str(pki_dir / "sa.key"),
             "--root-ca-file", str(pki_dir / "ca.crt"), "--use-service-account-credentials=true"]
            if component == "kube-controller-manager" else []
        )  # fmt: skip
        starter.start(component, [
            str(tools[component]), "--kubeconfig", kubeconfig, "--bind-address", "127.0.0.1",
            "--leader-elect=false", *extra,
        ])  # fmt: skip
    progress("starting containerd and importing the images")
    starter.start("containerd", [str(tools["containerd"]), "--config", str(lay.root / "containerd.toml")])
    _wait(starter, "containerd", "opened no socket", deadline, lay.containerd_socket.exists)
    _wait(
        starter, "containerd", "does not answer", deadline, lambda: _containerd_answers(lay.containerd_socket)
    )
    images.import_into(lay.containerd_socket, wanted, progress)
    progress("starting the kubelet and kube-proxy")
    starter.start("kubelet", [
        str(tools["kubelet"]), "--config", str(lay.root / "kubelet.yaml"), "--kubeconfig", kubeconfig,
        "--root-dir", str(lay.kubelet), "--node-ip", netns.NODE_IP,
        "--hostname-override", realconfig.NODE_NAME,
    ])  # fmt: skip
    starter.start("kube-proxy", [str(tools["kube-proxy"]), "--config", str(lay.root / "kube-proxy.yaml")])
    _wait(
        starter,
        "kubelet",
        f"did not make node {realconfig.NODE_NAME} Ready",
        deadline,
        lambda: _node_ready(starter.name),
    )
    _wait(
        starter, "kube-controller-manager", "created no `default` ServiceAccount", deadline,
        lambda: _in_namespace(
            starter.name, lambda api: api.find(DEFAULT_SERVICE_ACCOUNT) is not None
        ),
    )  # fmt: skip
    progress("starting CoreDNS")
    _kubectl(starter.name, ["apply", "-f", "-"], realconfig.coredns_manifests(refs["coredns"]))
    _wait(
        starter, "kube-proxy", "CoreDNS did not become Ready", deadline, lambda: _coredns_ready(starter.name)
    )


def _wait(starter: Starter, component: str, what: str, deadline: float, check: Callable[[], bool]) -> None:
    starter.progress(f"waiting for {component}")
    last_error = ""
    while True:
        try:
            if check():
                return
        except Exception as error:  # transient errors while starting
            last_error = (
                f" (last error: {str(error).splitlines()[0] if str(error) else type(error).__name__})"
            )
        dead = starter.dead()
        if dead or time.monotonic() > deadline:
            culprit = dead[0] if dead else component
            log = starter.log(culprit)
            verdict = "exited while the cluster was starting" if dead else what + last_error
            raise UserError(f"{culprit} {verdict}; log: {log}\n--- last lines ---\n{_tail(log)}")
        time.sleep(0.5)


def _in_namespace(name: str, check: Callable[[Rest], bool]) -> bool:
    """check(a client of the cluster), with the client made and used inside the cluster's namespace:
    outside it the cluster's addresses are not local and a request would leave the machine."""
    with netns.entered(netns.name_for(name)):
        return check(Rest.from_kubeconfig(layout(name).kubeconfig))


def _readyz(name: str) -> bool:
    return _in_namespace(name, lambda api: str(api.request("GET", "/readyz", timeout=5)).strip() == "ok")


def _node_ready(name: str) -> bool:
    def check(api: Rest) -> bool:
        node = api.find(f"/api/v1/nodes/{realconfig.NODE_NAME}")
        conditions = (node or {}).get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    return _in_namespace(name, check)


def _coredns_ready(name: str) -> bool:
    def check(api: Rest) -> bool:
        pods = api.get("/api/v1/namespaces/kube-system/pods", labelSelector="k8s-app=kube-dns")["items"]
        return any(
            c["type"] == "Ready" and c["status"] == "True"
            for pod in pods
            for c in pod.get("status", {}).get("conditions", [])
        )

    return _in_namespace(name, check)


def _containerd_answers(socket: Path) -> bool:
    ctr = [str(nodebins.path("ctr")), "--address", str(socket), "version"]
    return (
        subprocess.run(ctr, capture_output=True, env={**os.environ, **nodebins.environment()}).returncode == 0
    )


def _kubectl(name: str, args: list[str], stdin: str = "") -> str:
    argv = [str(binaries.path("kubectl")), "--kubeconfig", str(layout(name).kubeconfig), *args]
    proc = subprocess.run(
        netns.command(netns.name_for(name), argv), input=stdin, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise UserError(f"`kubectl {' '.join(args)}` failed: {proc.stderr.strip()}")
    return proc.stdout


def _healthy(name: str, state: dict[str, object]) -> bool:
    pids = state.get("pids")
    if not isinstance(pids, dict) or not all(_running(int(pid)) for pid in pids.values()):
        return False
    try:
        return _node_ready(name)
    except Exception:
        return False


def _info(name: str, state: dict[str, object], started: bool) -> RealCluster:
    def version(api: Rest) -> bool:
        found.append(api.get("/version")["gitVersion"])
        return True

    found: list[str] = []
    _in_namespace(name, version)
    image_refs = state.get("images")
    return RealCluster(
        name=name,
        kubeconfig=layout(name).kubeconfig,
        namespace=netns.name_for(name),
        server=f"https://{netns.NODE_IP}:{realconfig.API_PORT}",
        version=found[0],
        images=dict(image_refs) if isinstance(image_refs, dict) else {},
        started=started,
    )


def down(name: str, progress: Progress = print, keep_logs: bool = False) -> bool:
    """Stop everything `up` started and put the machine back; False when there was no such cluster."""
    root = layout(name).root
    if not root.exists():
        return False
    state = _state(name)
    recorded = state.get("cgroups")
    created = [str(c) for c in recorded] if isinstance(recorded, list) else []
    trees = _subtrees(str(state.get("cgroup_root", "")), created) if state.get("cgroup_root") else []
    # Every process of the cluster is in its cgroup subtree: the daemons, the shims, the pods' processes.
    deadline = time.monotonic() + 30
    while (pids := _cgroup_pids(trees)) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
    holder = state.get("holder")
    if isinstance(holder, int) and _running(holder):
        os.kill(holder, signal.SIGKILL)
    left_pids = _cgroup_pids(trees)
    left_cgroups = _remove_cgroups(trees) if not left_pids else [str(t) for t in trees]
    netns.delete(netns.name_for(name))
    restored = machine.restore(root / "sysctls-before.json")
    if restored:
        progress(f"restored sysctls the kubelet changed: {', '.join(restored)}")
    if left_pids or left_cgroups:
        raise UserError(
            f"real-node cluster {name!r} not fully removed: processes {sorted(left_pids)} "
            f"cgroups {left_cgroups}; its folder {root} is kept"
        )
    if keep_logs:
        kept = binaries.cache_dir() / "real-cluster-logs" / name
        shutil.rmtree(kept, ignore_errors=True)
        if (root / "logs").exists():
            shutil.copytree(root / "logs", kept)
            progress(f"logs of the failed start kept in {kept}")
    shutil.rmtree(root)
    return True


def status(name: str) -> dict[str, object]:
    info: dict[str, object] = {"name": name, "runtime": "real", "exists": exists(name), "ready": False}
    if not info["exists"]:
        return info
    state = _state(name)
    info.update(
        kubeconfig=str(layout(name).kubeconfig), netns=netns.name_for(name), logs=str(layout(name).logs)
    )
    info["ready"] = _healthy(name, state)
    return info
