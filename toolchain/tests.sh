#!/usr/bin/env bash
# Every test kind, in two pytest runs side by side (`make test`):
#   live    cluster, engine, node: the test cluster, vLLM engines and the real node, one after another
#           (they share the cluster and would starve each other's engines);
#   render  charts, unit: Helm renders and Python, nothing that listens or waits on a clock, at nice 10
#           so it takes only the CPU the live run leaves idle (its clusters and engines wait a lot).
# Each line of output carries its run's name; each run prints its slowest tests and its seconds per module.
# Exit status: the first failing run's, else 0.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv=${VENV:-.venv}

# Both runs render the umbrella: package its file:// dependency once, before they could race to.
"$venv/bin/python" -c 'from kvtier import helm, paths; helm.build_dependencies(paths.CHARTS / "kv-tiered-inference")' ||
  exit 1

run() {  # run NAME NICENESS PYTEST-ARGS...
  local name=$1 niceness=$2
  shift 2
  nice -n "$niceness" "$venv/bin/pytest" "$@" --durations=30 2>&1 | sed -u "s/^/[$name] /"
}

run live 0 tests/cluster tests/engine tests/node &
live=$!
run render 10 tests/charts tests/unit -p no:cacheprovider &
render=$!
wait "$render"
render_status=$?
wait "$live"
live_status=$?
echo "tests: live exit $live_status, render exit $render_status"
((live_status != 0)) && exit "$live_status"
exit "$render_status"
