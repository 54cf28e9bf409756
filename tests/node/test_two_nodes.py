"""Two real nodes (`lifecycle.up(nodes=2)`): each Ready with its own address and pod range, pods on one
reach pods, a Service and a host-network pod on the other (by address and by name), the machine's own
namespace refuses the new ranges, and `down` removes both nodes. One cluster for the module."""

from __future__ import annotations

import errno
import ipaddress
import json
import os
import secrets
import socket
from collections.abc import Iterator

import pytest

from kvtier.cluster.realnode import cgroups as realcgroups
from kvtier.cluster.realnode import config as realconfig
from kvtier.cluster.realnode import lifecycle as realnode
from kvtier.cluster.realnode import netns
from kvtier.cluster.realnode import routes as realroutes
from kvtier.cluster.realnode import start as realstart
from kvtier.cluster.realnode.client import Kube

START_TIMEOUT = float(os.environ.get("KVTIER_CLUSTER_TIMEOUT", "300"))
NS = "two-nodes"
HOST_PORT = 18080  # the host-network server's port on node 1 (nothing else listens there)
REFUSED = {errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EACCES}
# The contract other modules code against (lifecycle.up's docstring, docs/cluster.md).
EXPECTED = [
    ("real-node", "10.240.0.1", "10.244.0.0/24"),
    ("real-node-2", "10.240.0.2", "10.244.1.0/24"),
]


def _log(message: str) -> None:
    print(f"[two-nodes] {message}")


@pytest.fixture(scope="module")
def cluster(own_cluster) -> Iterator[realnode.RealCluster]:
    with own_cluster("-two", nodes=2) as started:
        yield started


@pytest.fixture(scope="module")
def kube(cluster: realnode.RealCluster) -> Kube:
    client = Kube(cluster)
    client.kubectl("create", "namespace", NS)
    return client


def _pod(cluster: realnode.RealCluster, name: str, node: str, script: str, host: bool = False) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": name}},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},  # through the scheduler, as a chart would
            "hostNetwork": host,
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": cluster.images["python"],
                    "imagePullPolicy": "Never",
                    "command": ["python3", "-c", script],
                }
            ],
        },
    }


def _server(port: int, marker: str) -> str:
    """An HTTP server answering `marker` and the address it was dialled on."""
    return (
        "import http.server as h\n"
        "class A(h.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        self.send_response(200); self.end_headers()\n"
        f"        self.wfile.write(b'{marker}')\n"
        f"h.HTTPServer(('', {port}), A).serve_forever()\n"
    )


def _client(urls: list[str]) -> str:
    """Fetches each URL (retrying while kube-proxy programs the Service), one answer a line."""
    return (
        "import time, urllib.request\n"
        f"for url in {urls!r}:\n"
        "    for attempt in range(30):\n"
        "        try:\n"
        "            print(url, urllib.request.urlopen(url, timeout=5).read().decode(), flush=True); break\n"
        "        except OSError as e:\n"
        "            if attempt == 29: print(url, 'FAILED', e, flush=True)\n"
        "            time.sleep(1)\n"
    )


def _apply(kube: Kube, *objects: dict) -> None:
    kube.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))


def _pod_ip(kube: Kube, name: str) -> str:
    return kube.kubectl("get", "pod", name, "-n", NS, "-o", "jsonpath={.status.podIP}")


def _answers(kube: Kube, cluster: realnode.RealCluster, name: str, node: str, urls: list[str]) -> list[str]:
    _apply(kube, _pod(cluster, name, node, _client(urls)))
    phase = kube.wait_phase(NS, name, {"Succeeded", "Failed"}, timeout=180)
    lines = kube.kubectl("logs", name, "-n", NS).splitlines()
    assert phase == "Succeeded", lines
    return lines


def test_both_nodes_are_ready_with_their_addresses_and_pod_ranges(cluster, kube) -> None:
    assert [(n.name, n.ip, n.pod_cidr) for n in cluster.nodes] == EXPECTED
    namespaces = [n.netns for n in cluster.nodes]
    assert namespaces[0] == cluster.namespace and len(set(namespaces)) == 2
    assert all(ns.startswith(netns.PREFIX) and netns.exists(ns) for ns in namespaces)
    listed = {
        n["metadata"]["name"]: n for n in json.loads(kube.kubectl("get", "nodes", "-o", "json"))["items"]
    }
    assert sorted(listed) == [name for name, _, _ in EXPECTED]
    for name, ip, cidr in EXPECTED:
        node = listed[name]
        conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
        addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
        assert conditions["Ready"] == "True", name
        assert addresses["InternalIP"] == ip and node["spec"]["podCIDR"] == cidr, name
    assert [n["name"] for n in realnode.status(cluster.name)["nodes"]] == [name for name, _, _ in EXPECTED]


def test_a_pod_on_node_2_reaches_node_1_by_pod_ip_service_and_node_name(cluster, kube) -> None:
    marker = secrets.token_hex(6)
    first, second = cluster.nodes
    _apply(
        kube,
        _pod(cluster, "web", first.name, _server(8000, f"pod-{marker}")),
        _pod(cluster, "hostweb", first.name, _server(HOST_PORT, f"host-{marker}"), host=True),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": NS},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8000}]},
        },
    )
    kube.kubectl("wait", "--for=condition=Ready", "pod/web", "pod/hostweb", "-n", NS, "--timeout=120s")
    web = _pod_ip(kube, "web")
    assert ipaddress.ip_address(web) in ipaddress.ip_network(first.pod_cidr)
    urls = [
        f"http://{web}:8000/",
        f"http://web.{NS}.svc.{realconfig.CLUSTER_DOMAIN}/",
        f"http://{first.ip}:{HOST_PORT}/",
        f"http://{first.name}:{HOST_PORT}/",  # the node's name, through CoreDNS's hosts entries
    ]
    answers = _answers(kube, cluster, "from-node-2", second.name, urls)
    expected = [f"pod-{marker}"] * 2 + [f"host-{marker}"] * 2
    assert answers == [f"{url} {answer}" for url, answer in zip(urls, expected, strict=True)]
    client = _pod_ip(kube, "from-node-2")
    assert ipaddress.ip_address(client) in ipaddress.ip_network(second.pod_cidr)


def test_a_pod_on_node_1_reaches_a_pod_on_node_2(cluster, kube) -> None:
    marker = secrets.token_hex(6)
    first, second = cluster.nodes
    _apply(kube, _pod(cluster, "web2", second.name, _server(8000, marker)))
    kube.kubectl("wait", "--for=condition=Ready", "pod/web2", "-n", NS, "--timeout=120s")
    web2 = _pod_ip(kube, "web2")
    assert ipaddress.ip_address(web2) in ipaddress.ip_network(second.pod_cidr)
    urls = [f"http://{web2}:8000/"]
    assert _answers(kube, cluster, "from-node-1", first.name, urls) == [f"{urls[0]} {marker}"]


def test_the_machine_refuses_the_second_nodes_ranges(cluster) -> None:
    """Outside the test's namespaces node 2's address and pods are not routed anywhere but refused."""
    second = cluster.nodes[1]
    assert realroutes.present() == list(netns.PRIVATE_RANGES.values())
    for address in (second.ip, str(next(ipaddress.ip_network(second.pod_cidr).hosts()))):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe, pytest.raises(OSError) as lookup:
            probe.connect((address, 80))  # a route lookup only: nothing is sent
        assert lookup.value.errno in REFUSED, f"{address} is routed out of the machine: {lookup.value}"


def test_down_removes_both_nodes(cluster) -> None:
    state = json.loads((realnode.layout(cluster.name).root / "state.json").read_text())
    pids = [*state["pids"].values(), *state["holders"].values()]
    assert len(state["holders"]) == 2
    assert realnode.down(cluster.name, progress=_log)
    assert not realnode.exists(cluster.name) and not realnode.layout(cluster.name).root.exists()
    assert not any(netns.exists(n.netns) for n in cluster.nodes)
    assert not any(realstart.running(pid) for pid in pids)
    tree = f"{realcgroups.own_cgroup()}/kvtier-{cluster.name}".strip("/")
    assert not [h for h in realcgroups.CGROUP_ROOT.iterdir() if (h / tree).exists()]
    # The unreachable routes are shared: they stay exactly while another real-node cluster is up.
    assert bool(realroutes.present()) == bool(netns.cluster_namespaces())
