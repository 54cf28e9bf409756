#!/usr/bin/env python3
"""Benchmark: `kvtier validate values/` against bare `helm template` of the same renders, in one run.

`kvtier validate` renders every environment with the pinned Helm 3 and Helm 4 and then checks the
output (Kubernetes schemas for each minor, LMCache, Curvine, policy). The baseline is what those
renders cost on their own: the same `helm template` commands (same chart, values file, release,
namespace, kube version), run one after another as a plain CI script would. Both sides are timed as
fresh processes, wall clock, interleaved; the ratio is the median of the per-run ratios. The chart's
dependencies are built before timing.

    .venv/bin/python benchmarks/validate_bench.py [--runs 5] [--values values/] [--opt-in]

Prints both times and the ratio (target <= 1.3x). With --opt-in, the layers `kvtier validate` runs only
when asked are timed too, once each and apart from the target: --server (a local control plane started
for the run, unless `kvtier cluster up` runs one) and --vllm (one probe process in the engine venv).
Also shows the baseline run in parallel, for comparison with what Helm alone could do with the same
parallelism, and one run with an empty HyperPod SDK verdict cache (the SDK's verdicts are kept by spec:
every run after the first reads them back). Exit 0 when the target is met, 1
when not, 2 when the toolchain is missing.
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
from kvtier.errors import UserError
from kvtier.validate import pipeline
from kvtier.validate.layers import render

TARGET = 1.3


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
    parser.add_argument("--opt-in", action="store_true", help="also time --server and --vllm, once each")
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
    validate = [str(Path(sys.executable).parent / "kvtier"), "validate", "--output", "json", args.values]
    env = {**os.environ, "COLUMNS": "200"}
    # What every `kvtier validate` pays before it starts Helm: the interpreter, the CLI and the
    # validate command module (the CLI imports only the chosen command's module).
    startup = [str(Path(sys.executable).parent / "kvtier"), "validate", "--help"]
    samples: dict[str, list[float]] = {"validate": [], "helm": [], "helm-parallel": [], "startup": []}
    cpu: dict[str, list[float]] = {k: [] for k in samples}  # user + sys seconds of the run and its children
    for _ in range(args.runs):  # interleaved, so load on the shared machine hits every side alike
        samples["helm"].append(timed(lambda: run_all(commands), cpu["helm"]))
        samples["validate"].append(
            timed(lambda: subprocess.run(validate, capture_output=True, env=env), cpu["validate"])
        )
        samples["helm-parallel"].append(timed(lambda: run_all(commands, options.jobs), cpu["helm-parallel"]))
        samples["startup"].append(
            timed(lambda: subprocess.run(startup, capture_output=True, env=env), cpu["startup"])
        )
    opt_in = [
        ("--server", "kvtier validate --server: + server-side dry run (opt-in, once)"),
        ("--vllm", "kvtier validate --vllm: + vLLM's argument checks (opt-in, once)"),
    ]
    for flag, _ in opt_in if args.opt_in else []:
        samples[flag], cpu[flag] = [], []
        samples[flag].append(
            timed(
                lambda flag=flag: subprocess.run([*validate, flag], capture_output=True, env=env), cpu[flag]
            )
        )
    with tempfile.TemporaryDirectory(prefix="kvtier-verdicts-") as empty:
        cold_env = {**env, "KVTIER_HYPERPOD_VERDICTS": empty}
        samples["cold"], cpu["cold"] = [], []
        samples["cold"].append(
            timed(lambda: subprocess.run(validate, capture_output=True, env=cold_env), cpu["cold"])
        )
    median = {k: statistics.median(v) for k, v in samples.items()}
    # Each run's validate is paired with the baseline run just before it: the median of those
    # ratios holds when the shared machine's speed drifts during the benchmark.
    paired = sorted(v / h for v, h in zip(samples["validate"], samples["helm"], strict=True))
    ratio = statistics.median(paired)
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
            f"kvtier validate values/ (+ k8s {len(options.minors)} minors, LMCache, Curvine, policy)",
            "validate",
        ),
        (f"helm template, {options.jobs} at a time (for comparison)", "helm-parallel"),
        ("kvtier validate values/, empty HyperPod SDK verdict cache (once)", "cold"),
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
    verdict = "met" if ratio <= TARGET else "MISSED"
    print(
        f"ratio validate / helm template, median of {len(paired)} paired runs: {ratio:.2f}x "
        f"(spread {paired[0]:.2f}-{paired[-1]:.2f}; target <= {TARGET}x): {verdict}"
    )
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
