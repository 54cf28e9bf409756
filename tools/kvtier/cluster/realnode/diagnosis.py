"""Why a namespace's pods are not Ready on the real node, in one line a CI log's tail still shows.

A `helm install --wait` that runs out of time says only "context deadline exceeded"; the cause is in the
node's conditions (disk or memory pressure), the pods' states (Pending, Evicted, OOMKilled, CrashLoopBackOff)
and the Warning events, which are gone with the cluster once the test tears it down.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

MAX_EVENTS = 4
MAX_MESSAGE = 160


class Kubectl(Protocol):
    def kubectl(self, *args: str, stdin: str = "", check: bool = True) -> str: ...


def _items(kube: Kubectl, *args: str) -> list[dict[str, Any]]:
    out = kube.kubectl("get", *args, "-o", "json", check=False)
    try:
        return list(json.loads(out)["items"])
    except (ValueError, KeyError):
        return []  # the API server did not answer: the other parts still say something


def node_conditions(nodes: list[dict[str, Any]]) -> list[str]:
    """Each node condition that is not as a healthy node has it (Ready True, every pressure False)."""
    unhealthy = []
    for node in nodes:
        for condition in node.get("status", {}).get("conditions", []):
            healthy = "True" if condition["type"] == "Ready" else "False"
            if condition.get("status") != healthy:
                unhealthy.append(f"node {condition['type']}={condition.get('status')}")
    return unhealthy


def pod_states(pods: list[dict[str, Any]]) -> list[str]:
    """Each pod that is not Ready: its phase, its reason, and each container's waiting or last exit."""
    states = []
    for pod in pods:
        status = pod.get("status", {})
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions", []))
        if ready or status.get("phase") == "Succeeded":
            continue
        parts = [status.get("phase", "?")]
        if status.get("reason"):
            parts.append(status["reason"])
        for container in status.get("containerStatuses", []):
            waiting = container.get("state", {}).get("waiting", {}).get("reason")
            last = container.get("lastState", {}).get("terminated", {})
            if waiting:
                parts.append(f"{container['name']} {waiting}")
            if last:
                parts.append(f"{container['name']} last exit {last.get('reason')} ({last.get('exitCode')})")
            if container.get("restartCount"):
                parts.append(f"{container['restartCount']} restarts")
        unschedulable = [
            c.get("message", "") for c in status.get("conditions", []) if c.get("reason") == "Unschedulable"
        ]
        parts += [m[:MAX_MESSAGE] for m in unschedulable]
        states.append(f"pod {pod['metadata']['name']}: {', '.join(parts)}")
    return states


def warnings(events: list[dict[str, Any]]) -> list[str]:
    """The newest Warning events, newest last."""
    warned = [e for e in events if e.get("type") == "Warning"]
    warned.sort(key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
    return [
        f"{e.get('reason')}: {' '.join(str(e.get('message', '')).split())[:MAX_MESSAGE]}"
        for e in warned[-MAX_EVENTS:]
    ]


def free_disk(path: Path) -> str:
    usage = shutil.disk_usage(path)
    return f"{usage.free / 2**30:.1f} GiB free of {usage.total / 2**30:.0f} GiB at {path}"


def why_not_ready(kube: Kubectl, namespace: str, root: Path) -> str:
    """One line: the unhealthy node conditions, the pods of `namespace` that are not Ready, its newest
    Warning events and the free space where the cluster keeps its images and volumes."""
    found = node_conditions(_items(kube, "nodes"))
    found += pod_states(_items(kube, "pods", "-n", namespace))
    found += warnings(_items(kube, "events", "-n", namespace))
    found.append(free_disk(root))
    return "; ".join(found)


@contextmanager
def explained(kube: Kubectl, namespace: str, root: Path, what: str) -> Iterator[None]:
    """Re-raise a failed step's AssertionError with `why_not_ready` first, while the cluster still holds
    the evidence: pytest's one-line summary then carries the cause, not only Helm's timeout."""
    try:
        yield
    except AssertionError as error:
        raise AssertionError(f"{what}: {why_not_ready(kube, namespace, root)}\n{error}") from None
