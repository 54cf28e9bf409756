"""L1 and L2 for real on CPU: vLLM replicas started from the chart's rendered container (values/cpu.yaml),
sharing one L2 directory, with LMCache's own engine, L1 and fs connector and our CPU KV-copy stand-in
(tools/lmcache-cpu-copy) in place of LMCache's CUDA copy kernels; or, with backend "vllm-native", vLLM's own
OffloadingConnector (CPU tier in /dev/shm, fs tier on the shared directory) with the offload-cpu-copy
stand-in in place of its CUDA block copy.

`measure_tiers` runs, in one go and on the same replicas: a cold prompt on replica 0, the same prompt again
there (L0), the same prompt on replica 1 (its first request: L2), and a second prompt whose L2 files are
removed before replica 1 asks for it (a clean recompute). Hit tokens come from each engine's own
Prometheus counter (`vllm:external_prefix_cache_hits`: tokens the KV connector supplied).
"""

from __future__ import annotations

import hashlib
import json
import re
import statistics
import sys
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvtier import paths, waiting
from kvtier.engine_rig import processes, rendered
from kvtier.engine_rig.errors import RigError
from kvtier.engine_rig.rig import ENGINE_ENV, MODEL_NAME, engine_python, generate_model
from kvtier.podscripts import kvcheck, l2_scan

CPU_VALUES = paths.ROOT / "values" / "cpu.yaml"
ADAPTER_PROBE = Path(__file__).with_name("copy_layout_probe.py")
CHUNK_FILE = re.compile(r".*\.data$")
LMCACHE = "lmcache"
NATIVE = "vllm-native"
SHM = Path("/dev/shm")
# The rig's own engine settings (kvtier.engine_rig.rig): CPU block size, batch, eager mode, seed.
RIG_ENGINE_ARGS = ("--block-size", "128", "--max-num-seqs", "4", "--enforce-eager", "--seed", "0")
ALL_TIERS = "l0+l1+l2"
SHARED_L2 = "l2"  # below work_dir: the one RWX volume every replica mounts
NO_CACHE = "none"  # no tier at all, prefix caching off too: the soak's reference answers
# The tier sets the load benchmark compares -> what each turns off in values/cpu.yaml (which has all three).
TIER_SETS: dict[str, dict[str, Any]] = {
    NO_CACHE: {"l0": {"enabled": False}, "l1": {"enabled": False}, "l2": {"enabled": False}},
    "l0": {"l1": {"enabled": False}, "l2": {"enabled": False}},
    "l0+l1": {"l2": {"enabled": False}},
    ALL_TIERS: {},
}


def rig_overlay(
    chunk_size: int,
    backend: str = LMCACHE,
    tiers: str = ALL_TIERS,
    engine_args: tuple[str, ...] = (),
    integrity: bool = True,
) -> dict[str, Any]:
    """What the rig changes in values/cpu.yaml: the generated tiny model from a "claim" instead of a
    download, and sizes for two replicas on a shared two-core machine. Tiers, invariants, flags: untouched,
    but for the backend (the native one takes vLLM's name of the same hash, sha256) and the tiers asked for
    (TIER_SETS: the chart's own `cache.l1.enabled` and `cache.l2.enabled`), plus `engine_args` in the
    model's extraArgs; `integrity` False turns off the chart's sealed L2 files (cache.l2.integrity)."""
    if tiers not in TIER_SETS:
        raise RigError(f"unknown tier set {tiers!r}; expected one of {', '.join(TIER_SETS)}")
    cache: dict[str, Any] = {"chunkSize": chunk_size, "l1": {"size": 1}}
    for tier, setting in TIER_SETS[tiers].items():
        cache[tier] = {**cache.get(tier, {}), **setting}
    if backend == NATIVE:
        cache |= {"backend": NATIVE, "hashAlgorithm": "sha256"}
    if not integrity:
        cache["l2"] = {**cache.get("l2", {}), "integrity": False}
    return {
        "cache": cache,
        "engine": {"cpuKVCacheSpace": "1Gi"},
        "models": [
            {
                "name": MODEL_NAME,
                "model": MODEL_NAME,
                "source": {"pvc": {"claimName": "rig-model", "path": MODEL_NAME}},
                "replicas": 2,
                "dtype": "float32",
                "maxModelLen": 4096,
                "resources": {"limits": {"memory": "8Gi"}},
                "extraArgs": [*RIG_ENGINE_ARGS, *engine_args],
            }
        ],
    }


@dataclass
class TieredRig(processes.Rig):
    work_dir: Path
    replicas: int = 2
    chunk_size: int = 256
    backend: str = LMCACHE
    tiers: str = ALL_TIERS
    engine_args: tuple[str, ...] = ()
    integrity: bool = True  # cache.l2.integrity
    # Replica i's L2 volume is l2_dirs[i] when given (one mount per pod, as a FUSE claim gives each pod);
    # by default every replica mounts work_dir/l2.
    l2_dirs: tuple[Path, ...] = ()
    log: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr))
    started: list[processes.Process] = field(default_factory=list)
    l2_dir: Path | None = None
    engine: rendered.RenderedEngine | None = None
    pod_names: list[str] = field(default_factory=list)

    def start(self) -> None:
        generate_model(self.work_dir / "models" / MODEL_NAME)
        overlay = rig_overlay(self.chunk_size, self.backend, self.tiers, self.engine_args, self.integrity)
        self.engine = rendered.render_engine([CPU_VALUES], overlay, self.work_dir)
        self.log(rendered.describe(self.engine))
        launched = [self._launch(index) for index in range(self.replicas)]  # started together
        for process in launched:
            took = processes.wait_ready(process)
            self.log(f"{process.name} ready at {process.url} ({took:.0f} s)")

    def add_replica(self) -> processes.Process:
        """One more replica of the same rendered container on the same L2, as a scale-out adds it;
        returned once ready, before it has served anything."""
        process = self._launch(len(self.started))
        took = processes.wait_ready(process)
        self.log(f"{process.name} (added) ready at {process.url} ({took:.0f} s)")
        return process

    def kill_and_restart(self, index: int, killed: Callable[[], None] = lambda: None) -> processes.Process:
        """SIGKILL replica `index` (a crash: nothing of it cleans up) and start it again as the kubelet
        restarts a container: same pod, so same pod name, volumes and address (port); returned once ready.
        `killed()` runs once the killed process has exited (the soak's window starts there)."""
        old = self.started[index]
        # vLLM's message queues of the killed process stay in /dev/shm as they would in the pod; the rig
        # removes them (a restart never reopens them), leaving the CPU tier's region to the new process.
        leftovers = processes.shm_segments(old.popen.pid) - {self.shm_region(index)}
        processes.kill(old)
        killed()
        for segment in leftovers:
            segment.unlink(missing_ok=True)
        port = int(old.url.rsplit(":", 1)[1])
        process = self._launch(index, log_name=f"tiered-{index}-restarted", port=port)
        self.started[index] = self.started.pop()
        took = processes.wait_ready(process)
        self.log(f"{process.name} restarted at {process.url} ({took:.0f} s)")
        return process

    def _launch(self, index: int, log_name: str = "", port: int | None = None) -> processes.Process:
        assert self.engine is not None, "start() renders the engine first"
        models, pod = self.work_dir / "models", self.work_dir / f"pod-{index}"
        shared_l2 = self.l2_dirs[index] if index < len(self.l2_dirs) else self.work_dir / SHARED_L2
        volumes = {"l2cache": shared_l2, "model": models, "cache": pod / "cache", "tmp": pod / "tmp"}
        for directory in volumes.values():
            directory.mkdir(parents=True, exist_ok=True)
        # The podscripts ConfigMap: the salt connector and the L2 hit recorder the engines import.
        volumes["podscripts"] = rendered.CHART / "files" / "podscripts"
        port = port or processes.free_port()
        # One pod name per replica and run: the native CPU tier's /dev/shm region is named after it.
        run = hashlib.sha256(str(self.work_dir).encode()).hexdigest()[:8]
        pod_name = f"{MODEL_NAME}-{index}-{run}"
        if pod_name not in self.pod_names:
            self.pod_names.append(pod_name)
        local = rendered.local_process(
            self.engine, engine_python(), volumes, pod / "etc-lmcache", port, pod_name
        )
        self.l2_dir = local.l2_dir
        env = {**ENGINE_ENV, **local.env, "VLLM_RPC_BASE_PATH": str(pod / "tmp"), "LMCACHE_LOG_LEVEL": "INFO"}
        process = processes.start(
            log_name or f"tiered-{index}", local.argv, env, self.work_dir / "logs", f"http://127.0.0.1:{port}"
        )
        self.started.append(process)
        return process

    def shm_region(self, index: int) -> Path:
        """Where vLLM keeps replica `index`'s native CPU tier (named after its engine_id, the pod name)."""
        return SHM / f"vllm_offload_{self.pod_names[index]}.mmap"

    def stop(self) -> None:
        for process in self.started:
            processes.stop(process)
        self.started.clear()
        for index in range(len(self.pod_names)):  # a region no stopped process still mapped
            self.shm_region(index).unlink(missing_ok=True)

    def chunk_files(self) -> list[Path]:
        """Final chunk files in this model's L2 namespace (LMCache's flat `*.data`, vLLM's nested `*.bin`)."""
        assert self.l2_dir is not None
        if self.backend == NATIVE:
            return sorted(p for p in self.l2_dir.rglob("*.bin") if l2_scan.is_chunk_file(self._below(p)))
        return sorted(p for p in self.l2_dir.glob("*") if CHUNK_FILE.match(p.name))

    def _below(self, path: Path) -> str:
        assert self.l2_dir is not None
        return path.relative_to(self.l2_dir).as_posix()

    def wait_for_chunks(self, count: int, timeout_s: float = 60.0) -> list[Path]:
        """LMCache stores to L2 after the request: wait until `count` chunk files are final."""

        def enough() -> list[Path]:
            files = self.chunk_files()
            return files if len(files) >= count else []

        def short(_: str) -> RigError:
            found = len(self.chunk_files())
            return RigError(f"{found} chunk files in {self.l2_dir} after {timeout_s:.0f} s, expected {count}")

        return waiting.wait_until(enough, deadline=waiting.deadline_in(timeout_s), fail=short, interval=0.2)


def connector_hit_tokens(url: str) -> float:
    """vLLM's counter of prompt tokens supplied by the KV connector (LMCache), summed over its labels."""
    with urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=10) as response:  # loopback only
        metrics = kvcheck.parse_metrics(response.read().decode())
    return metrics.get("vllm:external_prefix_cache_hits", 0.0)


def prompt_tokens(url: str, prompt: str) -> int:
    """Tokens of `prompt` by the engine's own tokenizer (vLLM's /tokenize)."""
    return len(prompt_token_ids(url, prompt))


def prompt_token_ids(url: str, prompt: str) -> list[int]:
    """The token ids vLLM's /tokenize gives `prompt`, as a completion request would see them."""
    body = json.dumps({"model": MODEL_NAME, "prompt": prompt}).encode()
    request = urllib.request.Request(
        url.rstrip("/") + "/tokenize", body, {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # loopback only
        return [int(token) for token in json.loads(response.read())["tokens"]]


@dataclass(frozen=True)
class Step:
    name: str
    replica: int
    ttft_ms: float
    hit_tokens: int
    text: str


def ask(rig: TieredRig, replica: int, prompt: str, name: str) -> Step:
    url = rig.started[replica].url
    before = connector_hit_tokens(url)
    answer = kvcheck.stream_completion(url, MODEL_NAME, prompt, max_tokens=8, timeout=300)
    hits = connector_hit_tokens(url) - before
    return Step(name, replica, answer["ttft_s"] * 1000, int(hits), answer["text"])


def measure_tiers(rig: TieredRig, words: int = 2000, repeats: int = 1) -> dict[str, Any]:
    """The table of the module docstring; `repeats` fresh prompts each, medians reported."""
    if len(rig.started) < 2:
        raise RigError("measuring L2 needs two replicas")
    # Warm-up, kept out of the table: each engine's first request, store and L2 load pay one-off set-up.
    warm = kvcheck.long_prompt(600)
    before = len(rig.chunk_files())
    kvcheck.stream_completion(rig.started[0].url, MODEL_NAME, warm, timeout=300)
    rig.wait_for_chunks(before + prompt_tokens(rig.started[0].url, warm) // rig.chunk_size)
    for replica in rig.started[1:]:
        kvcheck.stream_completion(replica.url, MODEL_NAME, warm, timeout=300)
    rounds: list[list[Step]] = []
    tokens = 0
    for _ in range(repeats):
        prompt, fresh = kvcheck.long_prompt(words), kvcheck.long_prompt(words)
        tokens = prompt_tokens(rig.started[0].url, prompt)
        present = len(rig.chunk_files())
        cold = ask(rig, 0, prompt, "cold (replica 0)")
        rig.wait_for_chunks(present + tokens // rig.chunk_size)
        l0 = ask(rig, 0, prompt, "L0 hit (replica 0 again)")
        l2 = ask(rig, 1, prompt, "L2 hit (replica 1, first time)")
        # The recompute path: replica 0 writes the fresh prompt's chunks, they vanish, replica 1 asks.
        before_fresh = set(rig.chunk_files())
        ask(rig, 0, fresh, "fresh prompt on replica 0")
        rig.wait_for_chunks(len(before_fresh) + prompt_tokens(rig.started[0].url, fresh) // rig.chunk_size)
        written = [p for p in rig.chunk_files() if p not in before_fresh]
        for path in written:
            path.unlink()
        gone = ask(rig, 1, fresh, "L2 file removed (replica 1)")
        cold_fresh = ask(rig, 0, fresh, "fresh prompt again on replica 0 (reference)")
        rounds.append([cold, l0, l2, gone, cold_fresh])
    steps = rounds[-1]
    table: list[dict[str, Any]] = [
        {
            "step": s.name,
            "ttft_ms": statistics.median(r[i].ttft_ms for r in rounds),
            "hit_tokens": s.hit_tokens,
        }
        for i, s in enumerate(steps)
    ]
    return {
        "table": table,
        "chunk_size": rig.chunk_size,
        "prompt_tokens": tokens,
        "l2_vs_cold": table[2]["ttft_ms"] / table[0]["ttft_ms"],
        "identical_outputs": all(r[0].text == r[2].text and r[3].text == r[4].text for r in rounds),
        "rounds": [[s.__dict__ for s in r] for r in rounds],
    }
