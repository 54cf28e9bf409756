"""Configuration files of the real-node cluster: containerd, CNI, kubelet, kube-proxy, kubeconfig, CoreDNS.

Every path points into the cluster's own folder (`Layout`); every address is in the cluster's network
namespace (kvtier.cluster.realnode.netns). The machine facts behind the settings are in DESIGN.md section 11.
"""

from __future__ import annotations

import json
import string
from dataclasses import dataclass
from pathlib import Path

import yaml

from kvtier import paths
from kvtier.cluster.common import binaries
from kvtier.cluster.realnode import netns

NODE_NAME = "real-node"
API_PORT = 6443
# The same path on every node, inside its own mount namespace (a bind of that node's folder of the
# cluster's tree): one DaemonSet's hostPaths serve all nodes. The kubelet's root dir, and a disk-backed
# folder for hostPath data that must differ by node (a Curvine worker's data).
KUBELET_DIR = "/var/lib/kubelet"
NODE_LOCAL_DIR = "/var/lib/kvtier-node"
MAX_NODES = 2  # one veth pair joins node 1's namespace to node 2's (realnode.netns.add_node)
CLUSTER_DOMAIN = "cluster.local"
COREDNS_FILE = paths.ROOT / "toolchain" / "realnode" / "coredns.yaml"


@dataclass(frozen=True)
class Layout:
    """Where one real-node cluster keeps its files."""

    root: Path

    def __getattr__(self, name: str) -> Path:  # pki, logs, etcd, containerd, kubelet, cni, ...
        return self.root / name

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig.yaml"

    @property
    def containerd_socket(self) -> Path:
        return self.root / "containerd" / "containerd.sock"


@dataclass(frozen=True)
class Node:
    """One node of a real-node cluster: its name, address, pod range and network namespace."""

    name: str
    ip: str
    pod_cidr: str
    netns: str
    index: int = 1

    def home(self, cluster: Layout) -> Layout:
        """Where this node keeps its own files: node 1 in the cluster's folder, node n in <folder>/node-n."""
        return cluster if self.index == 1 else Layout(cluster.root / f"node-{self.index}")

    def suffix(self) -> str:
        """Appended to this node's daemons' names (logs, pids): none for node 1."""
        return "" if self.index == 1 else f"-{self.index}"


def node(cluster: str, index: int) -> Node:
    name = NODE_NAME if index == 1 else f"{NODE_NAME}-{index}"
    return Node(name, netns.node_ip(index), netns.pod_cidr(index), netns.name_for(cluster, index), index)


def nodes(cluster: str, count: int) -> tuple[Node, ...]:
    return tuple(node(cluster, i) for i in range(1, count + 1))


def clusters_dir() -> Path:
    return binaries.state_dir() / "real-clusters"


def layout(name: str) -> Layout:
    return Layout(clusters_dir() / name)


def kubeconfig(layout: Layout) -> str:
    pki = layout.pki
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "kvtier-real",
                "cluster": {
                    "server": f"https://{netns.NODE_IP}:{API_PORT}",
                    "certificate-authority": str(pki / "ca.crt"),
                },
            }
        ],
        "users": [
            {
                "name": "admin",
                "user": {
                    "client-certificate": str(pki / "admin.crt"),
                    "client-key": str(pki / "admin.key"),
                },
            }
        ],
        "contexts": [{"name": "kvtier-real", "context": {"cluster": "kvtier-real", "user": "admin"}}],
        "current-context": "kvtier-real",
    }
    return yaml.safe_dump(config, sort_keys=False)


def containerd(layout: Layout, runc: Path, cni_bin: Path, sandbox_image: str) -> str:
    state = layout.containerd
    return f"""version = 2
root = "{state / "root"}"
state = "{state / "state"}"

[grpc]
  address = "{layout.containerd_socket}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{sandbox_image}"
  # The VM drops CAP_SYS_RESOURCE: a negative oom_score_adj fails every sandbox (DESIGN.md section 11).
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin}"
    conf_dir = "{layout.cni / "net.d"}"
"""


def cni(layout: Layout, pod_cidr: str = netns.POD_CIDR) -> str:
    bridge = {
        "type": "bridge",
        "bridge": "cni0",
        "isGateway": True,
        # Nothing may leave the namespace, so there is nothing to masquerade for.
        "ipMasq": False,
        "hairpinMode": True,
        "ipam": {
            "type": "host-local",
            "ranges": [[{"subnet": pod_cidr}]],
            "routes": [{"dst": "0.0.0.0/0"}],
            "dataDir": str(layout.cni / "ipam"),
        },
    }
    return json.dumps({"cniVersion": "1.0.0", "name": "kvtier", "plugins": [bridge]}, indent=2)


def kubelet(layout: Layout, cgroup_root: str, node_ip: str = netns.NODE_IP) -> str:
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # cgroup v1 on this VM (DESIGN.md section 11).
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cgroup_root,
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        "address": node_ip,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        # Only the API server (the same namespace) calls the kubelet; a test cluster, so no webhook.
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "clusterDNS": [netns.DNS_SERVICE_IP],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(layout.root / "resolv.conf"),
        "podLogsDir": str(layout.root / "pod-logs"),
        "failSwapOn": False,
        # The images exist only here (no registry): never collect them; evict only when really short.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "serializeImagePulls": False,
        "rotateCertificates": False,
        "staticPodPath": "",
        "maxPods": 60,
    }
    return yaml.safe_dump(config, sort_keys=False)


def kube_proxy(layout: Layout, node_name: str = NODE_NAME) -> str:
    config = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(layout.kubeconfig)},
        "hostnameOverride": node_name,
        "mode": "iptables",
        "clusterCIDR": netns.POD_RANGE,
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        # 0: leave the machine-wide conntrack table size and timeouts as they are.
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
    }
    return yaml.safe_dump(config, sort_keys=False)


def coredns_manifests(image: str, cluster_nodes: tuple[Node, ...] = ()) -> str:
    """CoreDNS as a Deployment behind the cluster DNS Service (toolchain/realnode/coredns.yaml); its `hosts`
    block resolves every node's name (node 1's alone when none are given)."""
    hosts = cluster_nodes or (node("", 1),)
    indent = "\n" + " " * 12  # the entries' indentation inside the Corefile's hosts block
    return string.Template(COREDNS_FILE.read_text()).substitute(
        image=image,
        cluster_domain=CLUSTER_DOMAIN,
        dns_service_ip=netns.DNS_SERVICE_IP,
        node_hosts=indent.join(f"{n.ip} {n.name}" for n in hosts),
    )
