"""Start-up of a real-node cluster's components, in order, each waited for before the next needs it.

`Starter` runs each daemon inside the cluster's network namespace and private mount namespace (held by
one holder process) and in its cgroup subtree (kvtier.cluster.realcgroups), logging to logs/<name>.log.
`start_all` writes the configuration files (kvtier.cluster.realconfig) and starts etcd, the control
plane, containerd (then imports the images), the kubelet and kube-proxy, then CoreDNS as a pod. A wait
that fails names the component, what it did not do, and the last lines of its log.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from kvtier.cluster import binaries, images, kwokconfig, netns, nodebins, pki, realcgroups, realconfig
from kvtier.cluster.rest import Rest
from kvtier.errors import UserError

Progress = Callable[[str], None]
DEFAULT_SERVICE_ACCOUNT = "/api/v1/namespaces/default/serviceaccounts/default"
# Inside the private mount namespace only: paths the kubelet, containerd and the CNI plugins write to
# that no option moves (/var/log/containers, /run/containerd/s, /var/run/netns, /var/lib/cni).
PRIVATE_TMPFS = ["/run", "/var/log", "/var/lib"]


class Starter:
    """Starts the cluster's processes in its namespaces and cgroup; each logs to logs/<name>.log."""

    def __init__(self, name: str, progress: Progress) -> None:
        self.name = name
        self.layout = realconfig.layout(name)
        self.progress = progress
        self.namespace = netns.name_for(name)
        own = realcgroups.own_cgroup() or ""
        self.daemon_cgroup = f"{own}/kvtier-{name}/daemons"
        self.pod_cgroup_root = f"{own}/kvtier-{name}"
        self.procs = realcgroups.procs_files(self.daemon_cgroup)
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
        self.pids[component] = proc.pid
        return proc.pid

    def dead(self) -> list[str]:
        return [c for c, pid in self.pids.items() if not running(pid)]


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def start_all(starter: Starter, tools: dict[str, Path], wanted: list[images.Image], timeout: float) -> None:
    """Every component, in order; raises UserError naming the first one that fails or dies."""
    deadline = time.monotonic() + timeout
    refs = {image.name: image.ref for image in wanted}
    _write_configs(starter, tools, refs["pause"])
    _start_control_plane(starter, tools, deadline)
    starter.progress("starting containerd and importing the images")
    lay = starter.layout
    starter.start("containerd", [str(tools["containerd"]), "--config", str(lay.root / "containerd.toml")])
    _wait(starter, "containerd", "opened no socket", deadline, lay.containerd_socket.exists)
    _wait(
        starter, "containerd", "does not answer", deadline, lambda: _containerd_answers(lay.containerd_socket)
    )
    images.import_into(lay.containerd_socket, wanted, starter.progress)
    _start_node(starter, tools, deadline)
    starter.progress("starting CoreDNS")
    _kubectl(starter.name, ["apply", "-f", "-"], realconfig.coredns_manifests(refs["coredns"]))
    _wait(
        starter, "kube-proxy", "CoreDNS did not become Ready", deadline, lambda: _coredns_ready(starter.name)
    )


def _write_configs(starter: Starter, tools: dict[str, Path], pause_image: str) -> None:
    lay = starter.layout
    pki.create(lay.pki)
    lay.kubeconfig.write_text(realconfig.kubeconfig(lay))
    (lay.root / "containerd.toml").write_text(
        realconfig.containerd(lay, tools["runc"], tools["cni-bridge"].parent, pause_image)
    )
    (lay.cni / "net.d" / "10-kvtier.conflist").write_text(realconfig.cni(lay))
    (lay.root / "kubelet.yaml").write_text(realconfig.kubelet(lay, starter.pod_cgroup_root))
    (lay.root / "kube-proxy.yaml").write_text(realconfig.kube_proxy(lay))


def _start_control_plane(starter: Starter, tools: dict[str, Path], deadline: float) -> None:
    pki_dir, kubeconfig = starter.layout.pki, str(starter.layout.kubeconfig)
    starter.progress("starting etcd and the control plane")
    starter.start("etcd", [
        str(tools["etcd"]), "--data-dir", str(starter.layout.etcd), "--unsafe-no-fsync",
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


def _start_node(starter: Starter, tools: dict[str, Path], deadline: float) -> None:
    lay = starter.layout
    starter.progress("starting the kubelet and kube-proxy")
    starter.start("kubelet", [
        str(tools["kubelet"]), "--config", str(lay.root / "kubelet.yaml"),
        "--kubeconfig", str(lay.kubeconfig), "--root-dir", str(lay.kubelet), "--node-ip", netns.NODE_IP,
        "--hostname-override", realconfig.NODE_NAME,
    ])  # fmt: skip
    starter.start("kube-proxy", [str(tools["kube-proxy"]), "--config", str(lay.root / "kube-proxy.yaml")])
    _wait(
        starter,
        "kubelet",
        f"did not make node {realconfig.NODE_NAME} Ready",
        deadline,
        lambda: node_ready(starter.name),
    )
    _wait(
        starter, "kube-controller-manager", "created no `default` ServiceAccount", deadline,
        lambda: in_namespace(
            starter.name, lambda api: api.find(DEFAULT_SERVICE_ACCOUNT) is not None
        ),
    )  # fmt: skip


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


def in_namespace(name: str, check: Callable[[Rest], bool]) -> bool:
    """check(a client of the cluster), with the client made and used inside the cluster's namespace:
    outside it the cluster's addresses are not local (kvtier.cluster.realroutes refuses them)."""
    with netns.entered(netns.name_for(name)):
        return check(Rest.from_kubeconfig(realconfig.layout(name).kubeconfig))


def _readyz(name: str) -> bool:
    return in_namespace(name, lambda api: str(api.request("GET", "/readyz", timeout=5)).strip() == "ok")


def node_ready(name: str) -> bool:
    def check(api: Rest) -> bool:
        node = api.find(f"/api/v1/nodes/{realconfig.NODE_NAME}")
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
