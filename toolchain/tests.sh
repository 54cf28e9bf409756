#!/usr/bin/env bash
# Every test kind for `make test`, in two pytest runs side by side, one per core:
#   engines  engine, node: vLLM engines on the rig, then the real node's umbrella; one after another,
#            since two sets of engines on two cores would starve each other (and one real node at a time);
#   control  cluster, charts, unit: the KWOK control plane, Helm renders and Python. The cluster tests
#            wait on the control plane much of the time, the render tests fill that time.
# One run of every kind after another took 4,817 s of tests on an idle machine (2026-12-03): the engine
# and node kinds about 2,400 s of it, the other three about 2,400 s, with under one core busy on average
# (3,972 s of CPU). Each line carries its run's name; each run prints its slowest tests and its seconds per
# module, and logs its own wall and CPU time as a phase (tests-engines, tests-control).
# Exit status: the engines run's when it failed, else the control run's.
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

lane engines tests/engine tests/node &
engines=$!
# No cache provider here: two runs writing .pytest_cache at the end would race.
lane control tests/cluster tests/charts tests/unit -p no:cacheprovider &
control=$!
wait "$control"
control_status=$?
wait "$engines"
engines_status=$?
# Both lanes' failures again, last, so a log cut to its tail still shows the lane that finished first:
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
for name in engines control; do
  summary "$logs/$name.log" | sed "s/^/tests: [$name] /"
done
echo "tests: engines exit $engines_status, control exit $control_status"
((engines_status != 0)) && exit "$engines_status"
exit "$control_status"
