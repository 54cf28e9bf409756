"""The real-engine rig: N vLLM CPU replicas of the tiny model on loopback, and vllm-router in front.

    with EngineRig(work_dir) as rig:          # generates the model, starts the replicas
        with rig.router("prefixaware") as url: # the router with the chart's flags for that strategy
            ...

These replicas run L0 (vLLM's prefix cache) only, with hand-written flags for the routing tests; L1 and L2
run on the replicas of kvtier.engine_rig.tiers, started from the chart's rendered container.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from kvtier import paths
from kvtier.engine_rig import processes, router_flags
from kvtier.engine_rig.errors import RigError
from kvtier.podscripts import kvcheck

ENGINE_VENV = paths.ROOT / ".venv-engine"
TINYMODEL = Path(__file__).with_name("tinymodel.py")
MODEL_NAME = "tiny-llama"
MAX_MODEL_LEN = 4096
BLOCK_SIZE = 128  # vLLM's CPU default, said explicitly: kv_aware routing must hash blocks the same way
CPU_TIERS_NOTE = (
    "routing rig: L0 (vLLM prefix cache) only, hand-written flags; L1/L2 run on the tiered rig "
    "(kvtier.engine_rig.tiers: the chart's rendered container, LMCache with the CPU copy stand-in)."
)
# Quiet, offline, reproducible engines that share two cores with everything else.
ENGINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "PYTHONHASHSEED": "0",
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB per replica
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",  # two replicas on two shared cores: no pinning
    "OMP_NUM_THREADS": "1",
    "VLLM_LOGGING_LEVEL": "WARNING",
    "VLLM_HOST_IP": "127.0.0.1",  # its internal message queues stay on loopback
}


def engine_python() -> Path:
    python = ENGINE_VENV / "bin" / "python"
    if not python.exists() or not list(ENGINE_VENV.glob(".installed-*")):
        raise RigError(f"the engine venv {ENGINE_VENV} is missing or incomplete: run toolchain/engine.sh")
    return python


def generate_model(out: Path) -> Path:
    proc = subprocess.run(
        [str(engine_python()), str(TINYMODEL), str(out)], capture_output=True, text=True, timeout=600
    )
    if proc.returncode != 0:
        raise RigError(f"generating the tiny model failed:\n{proc.stderr[-2000:]}")
    return out


@dataclass
class Replica:
    process: processes.Process
    events_endpoint: str  # ZMQ KV events (for kv_aware routing)

    @property
    def url(self) -> str:
        return self.process.url


@dataclass
class EngineRig(processes.Rig):
    work_dir: Path
    replicas: int = 2
    log: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr))
    started: list[Replica] = field(default_factory=list)
    model_dir: Path | None = None
    last_router_flags: tuple[list[str], str] = ([], "")

    def engine_argv(self, port: int, events_port: int) -> list[str]:
        assert self.model_dir is not None
        events = {
            "enable_kv_cache_events": True,
            "publisher": "zmq",
            "endpoint": f"tcp://127.0.0.1:{events_port}",
        }
        # `python -m` because the `vllm` console script fails under the vllm-cpu distribution name.
        return [
            str(engine_python()), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(self.model_dir), "--served-model-name", MODEL_NAME,
            "--host", "127.0.0.1", "--port", str(port),
            "--enable-prefix-caching", "--max-model-len", str(MAX_MODEL_LEN), "--max-num-seqs", "4",
            "--block-size", str(BLOCK_SIZE),
            "--dtype", "float32", "--seed", "0", "--enforce-eager", "--kv-events-config", json.dumps(events),
        ]  # fmt: skip

    def start(self) -> None:
        self.log(CPU_TIERS_NOTE)
        self.model_dir = generate_model(self.work_dir / "model")
        for index in range(self.replicas):
            port, events_port = processes.free_port(), processes.free_port()
            process = processes.start(
                f"engine-{index}",
                self.engine_argv(port, events_port),
                ENGINE_ENV,
                self.work_dir / "logs",
                f"http://127.0.0.1:{port}",
            )
            self.started.append(Replica(process, f"tcp://127.0.0.1:{events_port}"))
        for replica in self.started:  # started together, waited for one by one
            took = processes.wait_ready(replica.process)
            # The first request of a fresh engine pays one-off set-up; keep it out of every measurement.
            kvcheck.stream_completion(replica.url, MODEL_NAME, kvcheck.long_prompt(200), timeout=300)
            self.log(f"{replica.process.name} ready at {replica.url} ({took:.0f} s)")

    def kill(self, index: int, grace_s: float | None = None) -> None:
        """SIGKILL replica `index`'s processes (a crash); with `grace_s`, SIGTERM its server process first
        and give it that long to shut down, as the kubelet signals a container's first process (a forced
        pod delete: 2 s). Reaped when it returns; restart() brings it back on its address. vLLM's message
        queues it leaves in /dev/shm are removed (a restart never reopens them)."""
        process = self.started[index].process
        leftovers = processes.shm_segments(process.popen.pid)
        if grace_s is not None:
            process.popen.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.popen.wait(grace_s)
        processes.kill(process)
        for segment in leftovers:
            segment.unlink(missing_ok=True)

    def restart(self, index: int) -> None:
        """Replica `index` started again on its ports, as the kubelet restarts a container; once ready."""
        old = self.started[index]
        port, events_port = int(old.url.rsplit(":", 1)[1]), int(old.events_endpoint.rsplit(":", 1)[1])
        argv, logs = self.engine_argv(port, events_port), self.work_dir / "logs"
        process = processes.start(f"engine-{index}-restarted", argv, ENGINE_ENV, logs, old.url)
        self.started[index] = Replica(process, old.events_endpoint)
        took = processes.wait_ready(process)
        kvcheck.stream_completion(process.url, MODEL_NAME, kvcheck.long_prompt(200), timeout=300)
        self.log(f"{process.name} ready at {process.url} ({took:.0f} s)")

    def stop(self) -> None:
        for replica in self.started:
            processes.stop(replica.process)
        self.started.clear()

    @property
    def urls(self) -> list[str]:
        return [r.url for r in self.started]

    def router_argv(self, strategy: str, port: int, metrics_port: int) -> list[str]:
        flags, source = router_flags.router_flags(strategy)
        self.last_router_flags = (flags, source)
        argv = router_argv(flags, self.urls, port, metrics_port)
        if router_flags.STRATEGY_POLICY[strategy] == "kv_aware":
            # Static event sources (the rig has no Kubernetes discovery), and the engines' block size,
            # which discovery would ask the engines for.
            for replica in self.started:
                argv += ["--kv-event-source", f"{replica.url}={replica.events_endpoint}"]
            argv += ["--kv-event-block-size", str(BLOCK_SIZE), "--kv-event-model", MODEL_NAME]
        return argv

    @contextmanager
    def router(self, strategy: str) -> Iterator[str]:
        """The router for `strategy` in front of the replicas; yields its URL, stops it after."""
        if not self.started:
            raise RigError("start the replicas before the router")
        port = processes.free_port()
        argv = self.router_argv(strategy, port, processes.free_port())
        self.log(f"router {strategy}: flags from {self.last_router_flags[1]}: {' '.join(argv[1:])}")
        with running_router(argv, port, strategy, self.work_dir) as url:
            yield url


def router_argv(flags: list[str], urls: list[str], port: int, metrics_port: int) -> list[str]:
    """vllm-router with the chart's `flags`, on loopback, in front of `urls`."""
    argv = [str(ENGINE_VENV / "bin" / "vllm-router"), *flags, "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics_port)]
    return [*argv, "--worker-urls", *urls]


@contextmanager
def running_router(argv: list[str], port: int, name: str, work_dir: Path) -> Iterator[str]:
    """Start the router `argv` (listening on `port`), wait for /health, yield its URL, stop it after."""
    process = processes.start(f"router-{name}", argv, {}, work_dir / "logs", f"http://127.0.0.1:{port}")
    try:
        processes.wait_ready(process, "/health", timeout_s=120)
        yield process.url
    finally:
        processes.stop(process)
