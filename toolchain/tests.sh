#!/usr/bin/env bash
# Every test kind for `make test`, in three pytest runs side by side on the two cores:
#   engines  the engine kind (vLLM engines on the rig);
#   engines  the engine kind (vLLM engines on the rig), then the two longest render modules and the CLI fuzz;
#   node     the node kind (the real node's Curvine and umbrella, one and two real nodes at a time), then
#            the other unit modules;
#   control  cluster and the other charts modules: the KWOK control plane and Helm renders.
# Each run waits much of its time (engines starting, pods becoming Ready, the control plane answering), so
# three fill the two cores better than two. The lanes are balanced by the seconds per module their last
# runs printed (docs/ci-times.md): on 2026-12-06 engines 2,498 s, control 2,737 s, node 2,991 s, and the
# two-node umbrella (776-1,102 s, 2026-12-07) joined the node run, so the render modules (about 275 s) and
# the CLI fuzz (about 280 s) moved from node to engines.
# Each line carries its run's name; each run prints its slowest tests and its seconds per module, and logs
# its own wall and CPU time as a phase (tests-engines, tests-node, tests-control).
# Exit status: the first failed run's, in the order engines, node, control.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv=${VENV:-.venv}

# Both runs render the umbrella: package its file:// dependency once, before they could race to.
"$venv/bin/python" -c 'from kvtier import helm, paths; helm.build_dependencies(paths.CHARTS / "kv-tiered-inference")' ||
  exit 1

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
lane() { # lane NAME PYTEST-ARGS...
  local name=$1
  shift
  bash toolchain/phase.sh "tests-$name" "$venv/bin/pytest" "$@" --durations=30 2>&1 |
    tee "$logs/$name.log" | sed -u "s/^/[$name] /"
}

# The two longest render modules (about 275 s) and the CLI fuzz (about 280 s) run last in the engines lane.
moved=(tests/charts/test_string_rendering.py tests/charts/test_unittest_generated.py)
fuzz=tests/unit/test_cli_fuzz.py
lane engines tests/engine "${moved[@]}" "$fuzz" -p no:cacheprovider &
engines=$!
lane node tests/node tests/unit "--ignore=$fuzz" -p no:cacheprovider &
node=$!
# No cache provider: runs writing .pytest_cache at their ends would race.
lane control tests/cluster tests/charts "${moved[@]/#/--ignore=}" -p no:cacheprovider &
control=$!
status=0
for run in "$engines" "$node" "$control"; do
  wait "$run"
  code=$?
  ((status == 0)) && status=$code
done
# Every lane's failures again, last, so a log cut to its tail still shows the lanes that finished first:
# one line per distinct message (a module fixture's error repeats it for each of its tests), the first
# test that had it and how many more did.
summary() { # summary LOG
  awk '/^(FAILED|ERROR) / {
    if (split($0, part, " - ") == 1) { key = $0; test = $0; why = "" }
    else { why = substr($0, length(part[1]) + 4); key = why; test = part[1] }
    if (!(key in seen)) { order[++n] = key; first[key] = test; said[key] = why }
    seen[key]++
  }
  END { for (i = 1; i <= n && i <= 12; i++) { k = order[i]
    more = seen[k] > 1 ? sprintf(" (and %d more)", seen[k] - 1) : ""
    print substr(first[k] more (said[k] == "" ? "" : " - " said[k]), 1, 900) } }' "$1"
}
for name in engines node control; do
  summary "$logs/$name.log" | sed "s/^/tests: [$name] /"
done
echo "tests: exit $status (engines, node, control: the first that failed)"
exit "$status"
