"""The routing configurations the load benchmark compares, and the router replicas that serve them on the rig.

The chart's four strategies run with exactly the flags the chart renders (kvtier.engine_rig.router_flags).
Candidates the chart does not render yet are a chart strategy's flags with vLLM-router's own knobs changed
(CANDIDATES), named as candidates in every report, so a measurement can say which one the chart should
render before the chart is changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
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


@dataclass
class RouterReplicas(processes.Rig):
    """`replicas` router processes with `router_flags` (from flags(name), rendered once by the caller) in
    front of `engine_urls`, each with its own state as the chart's router pods are; `urls` once started."""

    name: str
    router_flags: list[str]
    engine_urls: Sequence[str]
    replicas: int
    work_dir: Path
    started: list[processes.Process] = field(default_factory=list)
    _ports: list[tuple[int, int]] = field(default_factory=list, init=False)  # (port, metrics port) by index

    @property
    def urls(self) -> list[str]:
        return [process.url for process in self.started]

    def start(self) -> None:
        self._ports = [(processes.free_port(), processes.free_port()) for _ in range(self.replicas)]
        for index in range(self.replicas):  # one by one: stop() stops those started if one fails
            self.started.append(self._launch(index))
        for process in self.started:
            processes.wait_ready(process, "/health", timeout_s=120)

    def kill_and_restart(self, index: int, killed: Callable[[], None] = lambda: None) -> processes.Process:
        """SIGKILL router `index` and start it again on the same ports, as the kubelet restarts a container
        (same pod address; its state, the prefix tree, starts empty); returned once healthy. `killed()`
        runs once the killed process has exited."""
        processes.kill(self.started[index])
        killed()
        self.started[index] = self._launch(index, "-restarted")
        processes.wait_ready(self.started[index], "/health", timeout_s=120)
        return self.started[index]

    def _launch(self, index: int, suffix: str = "") -> processes.Process:
        port, metrics_port = self._ports[index]
        argv = engine_rig.router_argv(self.router_flags, list(self.engine_urls), port, metrics_port)
        url = f"http://127.0.0.1:{port}"
        return processes.start(f"router-{self.name}-{index}{suffix}", argv, {}, self.work_dir / "logs", url)

    def stop(self) -> None:
        for process in self.started:
            processes.stop(process)
        self.started.clear()


@contextmanager
def routers(
    name: str, router_flags: list[str], engine_urls: Sequence[str], replicas: int, work_dir: Path
) -> Iterator[list[str]]:
    """RouterReplicas' URLs for the length of the block; they are stopped after."""
    with RouterReplicas(name, router_flags, engine_urls, replicas, work_dir) as started:
        yield started.urls
