"""The routing configurations the load benchmark compares, and the router replicas that serve them on the rig.

The chart's four strategies run with exactly the flags the chart renders (kvtier.engine_rig.router_flags).
Candidates the chart does not render yet are a chart strategy's flags with vLLM-router's own knobs changed
(CANDIDATES), named as candidates in every report, so a measurement can say which one the chart should
render before the chart is changed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from kvtier.engine_rig import processes, router_flags
from kvtier.engine_rig import rig as engine_rig
from kvtier.engine_rig.errors import RigError

# name -> (the chart strategy whose flags it starts from, flags that replace or add to them)
CANDIDATES: dict[str, tuple[str, list[str]]] = {
    # Least-loaded of two random replicas: no affinity at all, for a shared L2 that every replica reads.
    "leastloaded": ("roundrobin", ["--policy", "power_of_two"]),
    # cache_aware that turns to the least-loaded replica sooner (vllm-router's defaults: 64 and 1.5): an
    # affine replica that is busier by 2 requests and 20 % loses the request, since L2 holds its blocks.
    "prefixaware-balanced": (
        "prefixaware",
        ["--balance-abs-threshold", "2", "--balance-rel-threshold", "1.2"],
    ),
}
CHART_STRATEGIES = tuple(router_flags.STRATEGY_POLICY)
ROUTINGS = (*CHART_STRATEGIES, *CANDIDATES)
# What the load benchmark compares by default: kvaware is left out, since the rig's rendered engines publish
# no KV events (the chart renders them only for kvaware's StatefulSet; engine_rig.rig runs it by hand).
COMPARED = ("roundrobin", "prefixaware", "session", *CANDIDATES)


def flags(routing: str) -> tuple[list[str], str]:
    """(router flags less discovery, where they came from) for a chart strategy or a candidate."""
    if routing in CHART_STRATEGIES:
        return router_flags.router_flags(routing)
    if routing not in CANDIDATES:
        raise RigError(f"unknown routing {routing!r}; expected one of {', '.join(ROUTINGS)}")
    base, changes = CANDIDATES[routing]
    chart, source = router_flags.router_flags(base)
    return with_flags(chart, changes), f"candidate: {source} of {base}, with {' '.join(changes)}"


def with_flags(flags: list[str], changes: list[str]) -> list[str]:
    """`flags` with each `--name value` of `changes` replacing the same flag, or appended."""
    result = list(flags)
    for name, value in zip(changes[::2], changes[1::2], strict=True):
        if name in result:
            result[result.index(name) + 1] = value
        else:
            result += [name, value]
    return result


@contextmanager
def routers(
    name: str, router_flags: list[str], engine_urls: Sequence[str], replicas: int, work_dir: Path
) -> Iterator[list[str]]:
    """`replicas` router processes with `router_flags` (from flags(name), rendered once by the caller) in
    front of `engine_urls`, each with its own state (as the chart's router pods are); yields their URLs,
    stops them after."""
    with ExitStack() as stack:
        urls = []
        for index in range(replicas):
            port = processes.free_port()
            argv = engine_rig.router_argv(router_flags, list(engine_urls), port, processes.free_port())
            started = engine_rig.running_router(argv, port, f"{name}-{index}", work_dir)
            urls.append(stack.enter_context(started))
        yield urls
