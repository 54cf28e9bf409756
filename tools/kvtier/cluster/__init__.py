"""A real Kubernetes control plane on loopback for tests, `kvtier cluster` and `kvtier preflight`.

kube-apiserver, etcd, kube-controller-manager and kube-scheduler (built from the Go module proxy by
`toolchain/install.sh cluster`) run as local processes under kwokctl's binary runtime; KWOK fakes the
nodes and pod lifecycles (toolchain/kwok/). Nothing listens on anything but 127.0.0.1.
"""

from kvtier.cluster.kwok.lifecycle import ClusterInfo, down, status, up

__all__ = ["ClusterInfo", "down", "status", "up"]
