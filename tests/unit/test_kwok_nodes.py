"""kvtier.cluster.kwok.nodes.not_ready on node objects as the API server serves them (the cluster tests
wait on it: tests/harness/node_pool.py, `kvtier cluster up`)."""

from __future__ import annotations

from typing import Any

from kvtier.cluster.kwok import nodes

READY = {"type": "Ready", "status": "True"}
JOINING = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
GPU = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


class ServedNodes:
    """What `GET /api/v1/nodes` answers, for the one call not_ready makes."""

    def __init__(self, *items: dict[str, Any]) -> None:
        self.items = list(items)

    def get(self, path: str) -> dict[str, Any]:
        assert path == "/api/v1/nodes", path
        return {"items": self.items}


def _node(name: str, conditions: list[dict], taints: list[dict]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"taints": taints}, "status": {"conditions": conditions}}


def test_a_node_is_ready_only_once_ready_and_its_joining_taint_is_lifted() -> None:
    served = ServedNodes(
        _node("joined", [READY], [GPU]),  # a taint of the pool's own does not matter here
        _node("just-created", [], [JOINING]),  # as the API server stores a new Node
        _node("ready-still-tainted", [READY], [GPU, JOINING]),  # kwok was faster than the controller
        _node("not-ready", [{"type": "Ready", "status": "False"}], []),
    )
    names = ["joined", "just-created", "ready-still-tainted", "not-ready", "absent"]
    assert nodes.not_ready(served, names) == ["just-created", "ready-still-tainted", "not-ready", "absent"]
