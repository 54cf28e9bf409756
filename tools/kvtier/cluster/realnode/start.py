"""Start-up of a real-node cluster's components, in order, each waited for before the next needs it.

`Starter` runs each daemon inside the cluster's network namespace and private mount namespace (held by
one holder process) and in its cgroup subtree (realnode.cgroups), logging to logs/<name>.log. `start_all`
writes the configuration files (realnode.config), then runs the stages: `command_lines` is the table of
every daemon's command line, each `Stage` says which daemons start together and what start-up waits for
before the next stage (etcd and the API server; the controllers; containerd, then the images are
imported; the kubelet and kube-proxy), then CoreDNS runs as a pod. A wait that fails names the
component, what it did not do, and the last lines of its log.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kvtier import waiting
from kvtier.cluster.common import binaries
from kvtier.cluster.common.rest import Rest
from kvtier.cluster.kwok import config as kwokconfig
from kvtier.cluster.realnode import cgroups as realcgroups
from kvtier.cluster.realnode import config as realconfig
from kvtier.cluster.realnode import images, netns, nodebins, pki
from kvtier.errors import UserError

Progress = Callable[[str], None]
DEFAULT_SERVICE_ACCOUNT = "/api/v1/namespaces/default/serviceaccounts/default"
# Inside the private mount namespace only: paths the kubelet, containerd and the CNI plugins write to
# that no option moves (/var/log/containers, /run/containerd/s, /var/run/netns, /var/lib/cni).
PRIVATE_TMPFS = ["/run", "/var/log", "/var/lib"]


class Starter:
    """Starts the cluster's processes in its namespaces and cgroup; each logs to logs/<name>.log."""

    def __init__(self, name: str, progress: Progress, node: realconfig.Node | None = None) -> None:
        self.name = name
        self.node = node or realconfig.node(name, 1)
        self.layout = realconfig.layout(name)
        self.home = self.node.home(self.layout)  # this node's own files
        self.progress = progress
        self.namespace = self.node.netns
        own = realcgroups.own_cgroup() or ""
        # Node n's cgroups nest in node 1's subtree, so `down` finds every process of the cluster there.
        top = f"{own}/kvtier-{name}" + ("" if self.node.index == 1 else f"/node-{self.node.index}")
        self.daemon_cgroup = f"{top}/daemons"
        self.pod_cgroup_root = top
        self.procs = realcgroups.procs_files(self.daemon_cgroup)
        self.holder = 0
        self.pids: dict[str, int] = {}

    def log(self, component: str) -> Path:
        return self.layout.logs / f"{component}{self.node.suffix()}.log"

    def start_holder(self) -> int:
        """A process that owns the private mount namespace the daemons join."""
        mounts = "; ".join(f"mount -t tmpfs -o mode=0755 kvtier {path}" for path in PRIVATE_TMPFS)
        # The daemons see a resolver-less resolv.conf: no lookup is even tried outside the namespace.
        resolv = f"mount --bind {self.home.root / 'resolv.conf'} /etc/resolv.conf"
        # This node's folders at the paths every node shares (realconfig.KUBELET_DIR, NODE_LOCAL_DIR), each
        # a shared mount: containerd refuses a Bidirectional volume (a CSI node plugin's kubelet dir) under
        # a mount that is not, and looks at this bind, not the kubelet's own shared bind on top of it.
        binds = "; ".join(
            f"mkdir -p {inside}; mount --bind {outside} {inside}; mount --make-shared {inside}"
            for outside, inside in (
                (self.home.kubelet, realconfig.KUBELET_DIR),
                (self.home.root / "local", realconfig.NODE_LOCAL_DIR),
            )
        )
        script = f"set -e; {mounts}; {resolv}; {binds}; echo ready; exec sleep infinity"
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
                preexec_fn=realcgroups.joiner(self.procs),
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
                preexec_fn=realcgroups.joiner(self.procs),
            )
        self.pids[component + self.node.suffix()] = proc.pid
        return proc.pid

    def dead(self) -> list[str]:
        return [c for c, pid in self.pids.items() if not running(pid)]


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@dataclass(frozen=True)
class Stage:
    """Components started together, then what start-up waits for before the next stage needs it: for
    each wait, the component blamed when it does not happen, what it did not do, and the question."""

    say: str
    starts: tuple[str, ...]
    waits: tuple[tuple[str, str, Callable[[Starter], bool]], ...] = ()


CONTROL_PLANE = Stage(
    "starting etcd and the control plane",
    ("etcd", "kube-apiserver"),
    (("kube-apiserver", "is not ready (GET /readyz)", lambda s: _readyz(s.name)),),
)
CONTROLLERS = Stage("", ("kube-controller-manager", "kube-scheduler"))
CONTAINERD = Stage(
    "starting containerd and importing the images",
    ("containerd",),
    (
        ("containerd", "opened no socket", lambda s: s.home.containerd_socket.exists()),
        ("containerd", "does not answer", lambda s: _containerd_answers(s.home.containerd_socket)),
    ),
)
NODE = Stage(
    "starting the kubelet and kube-proxy",
    ("kubelet", "kube-proxy"),
    (
        ("kubelet", "did not make its node Ready", lambda s: node_ready(s.name, s.node.name)),
        (
            "kube-controller-manager",
            "created no `default` ServiceAccount",
            lambda s: in_namespace(s.name, lambda api: api.find(DEFAULT_SERVICE_ACCOUNT) is not None),
        ),
    ),
)


def start_all(
    starter: Starter,
    tools: dict[str, Path],
    wanted: list[images.Image],
    timeout: float,
    more: tuple[Starter, ...] = (),
) -> None:
    """Every component, in order: the control plane with node 1 (`starter`), then each further node's
    (`more`, holders started); raises UserError naming the first one that fails or dies."""
    deadline = waiting.deadline_in(timeout)
    refs = {image.name: image.ref for image in wanted}
    pki.create(starter.layout.pki)
    starter.layout.kubeconfig.write_text(realconfig.kubeconfig(starter.layout))
    for node_starter in (starter, *more):
        _write_configs(node_starter, tools, refs["pause"])
    argv = command_lines(starter.layout, tools)
    for stage in (CONTROL_PLANE, CONTROLLERS):
        _run(starter, stage, argv, deadline)
    for node_starter in (starter, *more):
        if more:
            node_starter.progress(f"node {node_starter.node.name}:")
        node_argv = command_lines(starter.layout, tools, node_starter.node)
        _run(node_starter, CONTAINERD, node_argv, deadline)
        images.import_into(node_starter.home.containerd_socket, wanted, node_starter.progress)
        _run(node_starter, NODE, node_argv, deadline)
        # No controller allocates pod ranges here (the CNI config holds each node's): the Node says it too.
        cidr = node_starter.node.pod_cidr
        patch = json.dumps({"spec": {"podCIDR": cidr, "podCIDRs": [cidr]}})
        _kubectl(starter.name, ["patch", "node", node_starter.node.name, "--type=merge", "-p", patch])
    starter.progress("starting CoreDNS")
    cluster_nodes = tuple(s.node for s in (starter, *more))
    _kubectl(starter.name, ["apply", "-f", "-"], realconfig.coredns_manifests(refs["coredns"], cluster_nodes))
    _wait(
        starter, "kube-proxy", "CoreDNS did not become Ready", deadline, lambda: _coredns_ready(starter.name)
    )


def restart_node(starter: Starter, tools: dict[str, Path], timeout: float) -> None:
    """A stopped node's containerd, then its kubelet and kube-proxy (its holder started again): the images
    are still in containerd's folder and the configuration files where start_all wrote them."""
    deadline = waiting.deadline_in(timeout)
    argv = command_lines(starter.layout, tools, starter.node)
    for stage in (CONTAINERD, NODE):
        _run(starter, stage, argv, deadline)


def _run(starter: Starter, stage: Stage, argv: dict[str, list[str]], deadline: float) -> None:
    if stage.say:
        starter.progress(stage.say)
    for component in stage.starts:
        starter.start(component, argv[component])
    for blamed, what, question in stage.waits:
        _wait(starter, blamed, what, deadline, functools.partial(question, starter))


def command_lines(
    lay: realconfig.Layout, tools: dict[str, Path], node: realconfig.Node | None = None
) -> dict[str, list[str]]:
    """Each daemon's command line: the cluster's components, in start order; the node's (containerd, the
    kubelet, kube-proxy) those of `node` (node 1 when None), from its own files."""
    pki_dir, kubeconfig = lay.pki, str(lay.kubeconfig)
    node = node or realconfig.node(lay.root.name, 1)
    home = node.home(lay)
    runtime_config, feature_gates = kwokconfig.admission_policy_switches(binaries.kubernetes_minor())
    controller = ["--kubeconfig", kubeconfig, "--bind-address", "127.0.0.1", "--leader-elect=false"]
    return {
        "etcd": [
            str(tools["etcd"]), "--data-dir", str(lay.etcd), "--unsafe-no-fsync",
            "--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
            "--listen-peer-urls", "http://127.0.0.1:2380",
            "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
            "--initial-cluster", "default=http://127.0.0.1:2380", "--listen-metrics-urls", "",
        ],
        "kube-apiserver": [
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
            "--runtime-config", runtime_config,
            *([f"--feature-gates={feature_gates}"] if feature_gates else []),
        ],
        "kube-controller-manager": [
            str(tools["kube-controller-manager"]), *controller,
            "--service-account-private-key-file", str(pki_dir / "sa.key"),
            "--root-ca-file", str(pki_dir / "ca.crt"), "--use-service-account-credentials=true",
        ],
        "kube-scheduler": [str(tools["kube-scheduler"]), *controller],
        "containerd": [str(tools["containerd"]), "--config", str(home.root / "containerd.toml")],
        "kubelet": [
            str(tools["kubelet"]), "--config", str(home.root / "kubelet.yaml"),
            "--kubeconfig", kubeconfig, "--root-dir", realconfig.KUBELET_DIR, "--node-ip", node.ip,
            "--hostname-override", node.name,
        ],
        "kube-proxy": [str(tools["kube-proxy"]), "--config", str(home.root / "kube-proxy.yaml")],
    }  # fmt: skip


def _write_configs(starter: Starter, tools: dict[str, Path], pause_image: str) -> None:
    """One node's files, in its own folder (the kubeconfig is the cluster's)."""
    home, node = starter.home, starter.node
    (home.root / "containerd.toml").write_text(
        realconfig.containerd(home, tools["runc"], tools["cni-bridge"].parent, pause_image)
    )
    (home.cni / "net.d" / "10-kvtier.conflist").write_text(realconfig.cni(home, node.pod_cidr))
    (home.root / "kubelet.yaml").write_text(realconfig.kubelet(home, starter.pod_cgroup_root, node.ip))
    proxy = realconfig.kube_proxy(starter.layout, node.name)
    (home.root / "kube-proxy.yaml").write_text(proxy)


def _wait(starter: Starter, component: str, what: str, deadline: float, check: Callable[[], bool]) -> None:
    starter.progress(f"waiting for {component}")

    def failure(culprit: str, verdict: str) -> UserError:
        log = starter.log(culprit)
        return UserError(f"{culprit} {verdict}; log: {log}\n--- last lines ---\n{waiting.tail(log)}")

    def died(_: str) -> UserError | None:
        dead = starter.dead()
        return failure(dead[0], "exited while the cluster was starting") if dead else None

    waiting.wait_until(
        check,
        deadline=deadline,
        abort=died,
        fail=lambda last: failure(component, what + last),
        tolerate=(Exception,),  # transient errors while starting
    )


def in_namespace(name: str, check: Callable[[Rest], bool]) -> bool:
    """check(a client of the cluster), with the client made and used inside the cluster's namespace:
    outside it the cluster's addresses are not local (kvtier.cluster.realnode.routes refuses them)."""
    with netns.entered(netns.name_for(name)):
        return check(Rest.from_kubeconfig(realconfig.layout(name).kubeconfig))


def _readyz(name: str) -> bool:
    return in_namespace(name, lambda api: str(api.request("GET", "/readyz", timeout=5)).strip() == "ok")


def node_ready(name: str, node_name: str = realconfig.NODE_NAME) -> bool:
    def check(api: Rest) -> bool:
        node = api.find(f"/api/v1/nodes/{node_name}")
        conditions = (node or {}).get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    return in_namespace(name, check)


def _coredns_ready(name: str) -> bool:
    def check(api: Rest) -> bool:
        pods = api.get("/api/v1/namespaces/kube-system/pods", labelSelector="k8s-app=kube-dns")["items"]
        return any(
            c["type"] == "Ready" and c["status"] == "True"
            for pod in pods
            for c in pod.get("status", {}).get("conditions", [])
        )

    return in_namespace(name, check)


def _containerd_answers(socket: Path) -> bool:
    ctr = [str(nodebins.path("ctr")), "--address", str(socket), "version"]
    return (
        subprocess.run(ctr, capture_output=True, env={**os.environ, **nodebins.environment()}).returncode == 0
    )


def _kubectl(name: str, args: list[str], stdin: str = "") -> str:
    argv = [str(binaries.path("kubectl")), "--kubeconfig", str(realconfig.layout(name).kubeconfig), *args]
    proc = subprocess.run(
        netns.command(netns.name_for(name), argv), input=stdin, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise UserError(f"`kubectl {' '.join(args)}` failed: {proc.stderr.strip()}")
    return proc.stdout
