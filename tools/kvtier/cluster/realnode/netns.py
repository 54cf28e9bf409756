"""The network namespace the real-node cluster lives in: private addresses, no way out.

`create` makes the namespace with loopback and one veth pair whose two ends both stay inside it; the node
(and API server) address sits on one end, the Service range is routed to it, and nothing is routed or
bridged to the machine's own namespace, so no packet can leave. `add_node` moves the pair's other end into
a second node's namespace, gives it that node's address and routes each node's pod range via the other's
node address: two test namespaces joined to each other only. Clients join it: a subprocess through
`ip netns exec` (`command`), Python code in this thread through setns (`entered`); one left outside that
dials these addresses fails at once (kvtier.cluster.realnode.routes).
"""

from __future__ import annotations

import ctypes
import ipaddress
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kvtier.errors import UserError

NETNS_DIR = Path("/run/netns")
NODE_IP = "10.240.0.1"
NODE_PREFIX = 24
NODE_LINK, PEER_LINK = "kvt0", "kvt1"
SERVICE_CIDR = "10.96.0.0/16"
API_SERVICE_IP = "10.96.0.1"
DNS_SERVICE_IP = "10.96.0.10"
POD_CIDR = "10.244.0.0/24"
# Node n (1, 2) has the address 10.240.0.n and the pod range 10.244.(n-1).0/24: all inside these two.
NODE_CIDR = str(ipaddress.ip_interface(f"{NODE_IP}/{NODE_PREFIX}").network)
POD_RANGE = "10.244.0.0/16"
# Every range that exists only in here; realnode.routes makes the machine's namespace refuse them.
PRIVATE_RANGES = {"node": NODE_CIDR, "Service": SERVICE_CIDR, "pod": POD_RANGE}
PREFIX = "kvtier-"
CLONE_NEWNET = 0x40000000


def name_for(cluster: str, node: int = 1) -> str:
    """Node 1's namespace (the control plane's too) is kvtier-<cluster>; node n's kvtier-<cluster>.n."""
    return f"{PREFIX}{cluster}" if node == 1 else f"{PREFIX}{cluster}.{node}"


def node_ip(node: int) -> str:
    return str(ipaddress.ip_address(NODE_IP) + node - 1)


def pod_cidr(node: int) -> str:
    return f"10.244.{node - 1}.0/24"


def exists(namespace: str) -> bool:
    return (NETNS_DIR / namespace).exists()


def cluster_namespaces() -> list[str]:
    """The real-node clusters' namespaces on this machine, whichever cache or session made them."""
    return sorted(p.name for p in NETNS_DIR.glob(f"{PREFIX}*")) if NETNS_DIR.is_dir() else []


def command(namespace: str, argv: list[str]) -> list[str]:
    """argv run inside the namespace."""
    return ["ip", "netns", "exec", namespace, *argv]


def _ip(*args: str) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise UserError(f"`ip {' '.join(args)}` failed: {proc.stderr.strip()}")


def create(namespace: str) -> None:
    _ip("netns", "add", namespace)
    _ip("-n", namespace, "link", "set", "lo", "up")
    _ip("-n", namespace, "link", "add", NODE_LINK, "type", "veth", "peer", "name", PEER_LINK)
    _ip("-n", namespace, "addr", "add", f"{NODE_IP}/{NODE_PREFIX}", "dev", NODE_LINK)
    _ip("-n", namespace, "link", "set", PEER_LINK, "up")
    _ip("-n", namespace, "link", "set", NODE_LINK, "up")
    # Clients in the namespace dial Service addresses; kube-proxy rewrites them to pods after routing.
    _ip("-n", namespace, "route", "add", SERVICE_CIDR, "dev", NODE_LINK)
    # Pod -> Service -> pod on the same bridge is routed by the namespace (these sysctls are per namespace).
    with entered(namespace):
        Path("/proc/sys/net/ipv4/ip_forward").write_text("1\n")


def add_node(first: str, namespace: str, node: int) -> None:
    """Node `node`'s namespace, joined to node 1's (`first`) by the pair's free end: each node reaches the
    other's pods through the other's node address; the Service range goes to kube-proxy's rules here."""
    _ip("netns", "add", namespace)
    _ip("-n", namespace, "link", "set", "lo", "up")
    _ip("-n", first, "link", "set", PEER_LINK, "netns", namespace)
    _ip("-n", namespace, "addr", "add", f"{node_ip(node)}/{NODE_PREFIX}", "dev", PEER_LINK)
    _ip("-n", namespace, "link", "set", PEER_LINK, "up")
    _ip("-n", namespace, "route", "add", SERVICE_CIDR, "dev", PEER_LINK)
    _ip("-n", namespace, "route", "add", pod_cidr(1), "via", NODE_IP)
    _ip("-n", first, "route", "add", pod_cidr(node), "via", node_ip(node))
    with entered(namespace):
        Path("/proc/sys/net/ipv4/ip_forward").write_text("1\n")


def delete(namespace: str) -> None:
    if exists(namespace):
        _ip("netns", "delete", namespace)


_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"setns(CLONE_NEWNET): {os.strerror(error)}")


@contextmanager
def entered(namespace: str) -> Iterator[None]:
    """Run the block (this thread, and the processes it starts) inside the namespace; sockets opened
    here stay in it after the block."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(NETNS_DIR / namespace, os.O_RDONLY)
    except FileNotFoundError:
        os.close(own)
        raise UserError(f"network namespace {namespace!r} does not exist (is the cluster up?)") from None
    try:
        _setns(target)
        yield
    finally:
        _setns(own)
        os.close(target)
        os.close(own)
