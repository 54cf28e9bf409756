"""Nodes one test adds to the shared test cluster: a pool under a label of its own, waited for until a
scheduler would consider them, and deleted afterwards."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kvtier import waiting
from kvtier.cluster.common.rest import Rest
from kvtier.cluster.kwok import nodes as fake_nodes

READY_TIMEOUT_S = 90.0


def run_id() -> str:
    """A fresh label value for one test's nodes. It starts with a letter: a bare hex string such as
    `123e45` is a number to YAML (PyYAML writes it unquoted, Helm reads it back as a float), and a values
    file selecting it would select nothing."""
    return f"r{secrets.token_hex(3)}"


def served(rest: Rest, selector: str) -> list[dict[str, Any]]:
    """The pool's nodes as the API server holds them, with any taint a controller added."""
    return list(rest.get("/api/v1/nodes", labelSelector=selector)["items"])


def joining(rest: Rest, selector: str, count: int) -> list[str]:
    """What keeps the pool from taking pods (empty once all `count` nodes have joined)."""
    names = [n["metadata"]["name"] for n in served(rest, selector)]
    missing = [f"{count - len(names)} node(s) not created"] if len(names) != count else []
    return missing + [f"{name} not Ready or still tainted" for name in fake_nodes.not_ready(rest, names)]


def wait_joined(rest: Rest, selector: str, count: int) -> None:
    """Wait until `count` nodes match and each is Ready without the joining taint. The API server's
    TaintNodesByCondition admission gives every new node `node.kubernetes.io/not-ready:NoSchedule`; the
    node lifecycle controller lifts it once kwok reports the node Ready (0.3 s when idle, longer on busy
    cores), and until then no pod that does not tolerate it may land there (fake_nodes.not_ready)."""
    waiting.wait_until(
        lambda: not joining(rest, selector, count),
        deadline=waiting.deadline_in(READY_TIMEOUT_S),
        fail=lambda _: AssertionError(
            f"{selector}: not joined in {READY_TIMEOUT_S:.0f} s: {joining(rest, selector, count)}"
        ),
    )


@contextmanager
def added(rest: Rest, bodies: list[dict[str, Any]], selector: str) -> Iterator[None]:
    """Create the nodes, wait until they have joined, and delete every node `selector` matches after."""
    try:
        for body in bodies:
            rest.post("/api/v1/nodes", body)
        wait_joined(rest, selector, len(bodies))
        yield
    finally:
        for node in served(rest, selector):
            rest.delete(f"/api/v1/nodes/{node['metadata']['name']}")
