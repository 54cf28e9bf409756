#!/usr/bin/env python3
"""Benchmark: `kvtier validate values/` against bare `helm template` of the same renders, in one run.

`kvtier validate` renders every environment with the pinned Helm 3 and Helm 4 and then checks the
output (Kubernetes schemas for each minor, LMCache, Curvine, policy); by default it also dry-runs every
object on the local control plane, which the first run starts and later runs reuse. The baseline is what those
renders cost on their own: the same `helm template` commands (same chart, values file, release,
namespace, kube version), run one after another as a plain CI script would. Both sides are timed as
fresh processes, wall clock, interleaved; the ratio is the median of the per-run ratios. The chart's
dependencies are built before timing.

    .venv/bin/python benchmarks/validate_bench.py [--runs 5] [--values values/] [--opt-in]

Prints the times and two ratios: the default mode, control plane reused (target <= 2x), and --offline
(target <= 1.3x); the default's first run, which starts the control plane, is timed once apart. With
--opt-in, --vllm (one probe process in the engine venv), which runs only when asked, is timed once too.
Also shows the baseline run in parallel, for comparison with what Helm alone could do with the same
parallelism, and one run with an empty HyperPod SDK verdict cache (the SDK's verdicts are kept by spec:
every run after the first reads them back). Exit 0 when both targets are met, 1
when not, 2 when the toolchain (the control plane's binaries included) is missing.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kvtier import paths
from kvtier.cluster.kwok import lifecycle
from kvtier.errors import UserError
from kvtier.validate import pipeline
from kvtier.validate.layers import render, server
from kvtier.validate.options import OFFLINE_ENV

TARGETS = {"default": 2.0, "offline": 1.3}


def helm_commands(files: list[Path], options: pipeline.Options) -> list[list[str]]:
    """The exact `helm template` commands `kvtier validate` runs for these files."""
    return [
        render.template(f, major, options.release, options.namespace, options.kube_version).command()
        for f in files
        for major in options.helm_majors
    ]


def timed(fn, cpu: list[float] | None = None) -> float:
    """Wall seconds of fn(); its children's CPU seconds go to `cpu` (load on a shared machine skews wall)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    fn()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if cpu is not None:
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return wall


def run_all(commands: list[list[str]], jobs: int = 1) -> None:
    def one(command: list[str]) -> None:
        subprocess.run(command, check=True, capture_output=True)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, commands))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--values", default=str(paths.VALUES))
    parser.add_argument("--opt-in", action="store_true", help="also time --vllm, once")
    args = parser.parse_args()
    try:
        files = pipeline.collect([args.values])
        options = pipeline.Options()
        commands = helm_commands(files, options)
        problem = render.ensure_dependencies()
    except UserError as error:
        print(f"validate_bench: {error}", file=sys.stderr)
        return 2
    if problem:
        print(f"validate_bench: {problem}", file=sys.stderr)
        return 2
    kvtier = str(Path(sys.executable).parent / "kvtier")
    default = [kvtier, "validate", "--output", "json", args.values]
    offline = [*default, "--offline"]
    env = {k: v for k, v in os.environ.items() if k != OFFLINE_ENV} | {"COLUMNS": "200"}
    # What every `kvtier validate` pays before it starts Helm: the interpreter, the CLI and the
    # validate command module (the CLI imports only the chosen command's module).
    startup = [kvtier, "validate", "--help"]
    samples: dict[str, list[float]] = {
        k: [] for k in ("default", "offline", "helm", "helm-parallel", "startup", "first")
    }
    cpu: dict[str, list[float]] = {k: [] for k in samples}  # user + sys seconds of the run and its children
    if server.unavailable(None):
        print(f"validate_bench: {server.unavailable(None)}", file=sys.stderr)
        return 2
    stopped = not lifecycle.running() and not lifecycle.running(server.LOCAL_CLUSTER)
    # The default's first run starts the control plane (unless one runs): timed once, apart.
    samples["first"].append(timed(lambda: _run(default, env), cpu["first"]))
    for _ in range(args.runs):  # interleaved, so load on the shared machine hits every side alike
        samples["helm"].append(timed(lambda: run_all(commands), cpu["helm"]))
        samples["default"].append(timed(lambda: _run(default, env), cpu["default"]))
        samples["offline"].append(timed(lambda: _run(offline, env), cpu["offline"]))
        samples["helm-parallel"].append(timed(lambda: run_all(commands, options.jobs), cpu["helm-parallel"]))
        samples["startup"].append(timed(lambda: _run(startup, env), cpu["startup"]))
    opt_in = [("--vllm", "kvtier validate --offline --vllm: + vLLM's argument checks (opt-in, once)")]
    for flag, _ in opt_in if args.opt_in else []:
        samples[flag], cpu[flag] = [], []
        samples[flag].append(timed(lambda flag=flag: _run([*offline, flag], env), cpu[flag]))
    with tempfile.TemporaryDirectory(prefix="kvtier-verdicts-") as empty:
        cold_env = {**env, "KVTIER_HYPERPOD_VERDICTS": empty}
        samples["cold"], cpu["cold"] = [], []
        samples["cold"].append(timed(lambda: _run(offline, cold_env), cpu["cold"]))
    median = {k: statistics.median(v) for k, v in samples.items()}
    # Each run's validate is paired with the baseline run just before it: the median of those
    # ratios holds when the shared machine's speed drifts during the benchmark.
    ratios = {
        mode: sorted(v / h for v, h in zip(samples[mode], samples["helm"], strict=True)) for mode in TARGETS
    }
    table = Table(
        title=f"kvtier validate vs bare helm template ({len(files)} environments x "
        f"{len(options.helm_majors)} Helm majors = {len(commands)} renders; median of {args.runs})",
        title_justify="left",
    )
    for column in ("what", "median s", "min s", "max s", "vs helm template", "CPU s (median)"):
        table.add_column(column, justify="right" if column != "what" else "left")
    rows = (
        ("helm template, one after another (baseline)", "helm"),
        (
            f"kvtier validate values/ (+ k8s {len(options.minors)} minors, LMCache, Curvine, policy, "
            "API server dry run; control plane reused)",
            "default",
        ),
        ("kvtier validate --offline values/ (no API server)", "offline"),
        (
            "kvtier validate values/, first run (starts the control plane)"
            if stopped
            else "kvtier validate values/, first run (a control plane was already up)",
            "first",
        ),
        (f"helm template, {options.jobs} at a time (for comparison)", "helm-parallel"),
        ("kvtier validate --offline values/, empty HyperPod SDK verdict cache (once)", "cold"),
        ("kvtier validate --help: interpreter + CLI + command module", "startup"),
        *((label, flag) for flag, label in opt_in if flag in samples),
    )
    for label, key in rows:
        table.add_row(
            label,
            f"{median[key]:.2f}",
            f"{min(samples[key]):.2f}",
            f"{max(samples[key]):.2f}",
            f"{median[key] / median['helm']:.2f}x",
            f"{statistics.median(cpu[key]):.2f}",
        )
    Console(width=140).print(table)
    met = True
    for mode, target in TARGETS.items():
        paired = ratios[mode]
        ratio = statistics.median(paired)
        met = met and ratio <= target
        print(
            f"ratio validate ({mode}) / helm template, median of {len(paired)} paired runs: {ratio:.2f}x "
            f"(spread {paired[0]:.2f}-{paired[-1]:.2f}; target <= {target}x): "
            f"{'met' if ratio <= target else 'MISSED'}"
        )
    return 0 if met else 1


def _run(command: list[str], env: dict[str, str]) -> None:
    subprocess.run(command, capture_output=True, env=env)


if __name__ == "__main__":
    sys.exit(main())
