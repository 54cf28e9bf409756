"""Time every helm-unittest suite of the charts: the real helm-unittest vs the pytest plugin.

    .venv/bin/python benchmarks/unittest_bench.py [--repeat N] [CHART ...]

Both tools run on the same throw-away copies of the charts (default: every chart under charts/ with
suites), once per repeat, in alternation; the table shows the median wall time of each and the
ratio plugin / helm-unittest (goal: <= 1.5). The plugin's time is a whole `pytest` process, start-up
included, as a user would run it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kvtier.unittest_reference import isolated_pytest, mirror_chart

ROOT = Path(__file__).resolve().parents[1]
HELM_UNITTEST = ROOT / ".tools" / "bin" / "helm-unittest"


def _timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "charts", nargs="*", type=Path, help="chart directories (default: charts/* with suites)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of each tool (median reported)")
    parser.add_argument(
        "--no-batch", action="store_true", help="run the plugin with --helm-unittest-no-batch"
    )
    args = parser.parse_args()
    if not HELM_UNITTEST.exists():
        print(f"helm-unittest is not built at {HELM_UNITTEST}; run `make tools`", file=sys.stderr)
        return 2
    charts = args.charts or sorted(p.parent.parent for p in (ROOT / "charts").glob("*/tests/*_test.yaml"))
    charts = sorted({c.resolve() for c in charts})
    with tempfile.TemporaryDirectory() as tmp:
        copies = [mirror_chart(chart, Path(tmp) / "repo", ROOT) for chart in charts]
        real_cmd = [str(HELM_UNITTEST), "-f", "tests/*_test.yaml", *map(str, copies)]
        plugin_cmd, plugin_env = isolated_pytest(tmp)
        plugin_cmd.append("-q")
        for copy in copies:
            plugin_cmd += ["--helm-unittest-root", str(copy)]
        plugin_cmd += ["--helm-unittest-no-batch"] if args.no_batch else []
        plugin_cmd += list(map(str, copies))
        real, ours = [], []
        for i in range(args.repeat):
            seconds, rc_real = _timed(real_cmd, Path(tmp))
            real.append(seconds)
            seconds, rc_ours = _timed(plugin_cmd, Path(tmp), plugin_env)
            ours.append(seconds)
            print(f"run {i + 1}: helm-unittest {real[-1]:.2f} s (exit {rc_real}), ", end="")
            print(f"plugin {ours[-1]:.2f} s (exit {rc_ours})")
    real_s, ours_s = statistics.median(real), statistics.median(ours)
    print()
    print(
        f"charts: {', '.join(c.name for c in charts)}  ({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})"
    )
    print(f"{'tool':<16}{'median s':>10}")
    print(f"{'helm-unittest':<16}{real_s:>10.2f}")
    print(f"{'pytest plugin':<16}{ours_s:>10.2f}")
    print(f"ratio plugin/helm-unittest: {ours_s / real_s:.2f}x (goal <= 1.5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
