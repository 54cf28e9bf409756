"""Fake nodes shaped like the targets (toolchain/kwok/nodes.yaml), created through the API."""

from __future__ import annotations

from typing import Any

import yaml

from kvtier import paths
from kvtier.cluster.common.rest import Rest

NODES_FILE = paths.ROOT / "toolchain" / "kwok" / "nodes.yaml"
FAKE_LABEL = "kvtier.io/fake-node"  # marks nodes this module created (kwok manages every node anyway)


def manifests() -> list[dict[str, Any]]:
    """One Node body per node of every group in nodes.yaml."""
    nodes = []
    for group in yaml.safe_load(NODES_FILE.read_text()):
        for index in range(int(group["count"])):
            name = f"{group['name']}-{index}"
            labels = {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                FAKE_LABEL: "true",
                **group["labels"],
            }
            nodes.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": labels},
                    "spec": {"taints": group.get("taints", [])},
                    "status": {
                        "capacity": group["capacity"],
                        "allocatable": group["allocatable"],
                        "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux"},
                    },
                }
            )
    return nodes


def ensure(rest: Rest) -> list[str]:
    """Create the nodes that do not exist yet; returns every node name of nodes.yaml."""
    existing = {node["metadata"]["name"] for node in rest.get("/api/v1/nodes")["items"]}
    names = []
    for body in manifests():
        names.append(body["metadata"]["name"])
        if body["metadata"]["name"] not in existing:
            rest.post("/api/v1/nodes", body)
    return names


JOINING_TAINT = "node.kubernetes.io/not-ready"  # the API server's TaintNodesByCondition gives it to new nodes


def not_ready(rest: Rest, names: list[str]) -> list[str]:
    """Names among `names` that no pod could land on yet: absent, Ready not True, or still carrying the
    not-ready taint of a joining node, which the node lifecycle controller lifts after Ready."""
    ready = set()
    for node in rest.get("/api/v1/nodes")["items"]:
        conditions = node.get("status", {}).get("conditions") or []
        taints = node.get("spec", {}).get("taints") or []
        if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) and not any(
            t.get("key") == JOINING_TAINT for t in taints
        ):
            ready.add(node["metadata"]["name"])
    return [name for name in names if name not in ready]
