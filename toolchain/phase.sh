#!/usr/bin/env bash
# Runs one phase of `make test` and logs its wall time and the CPU time it used (bash's `times`: user +
# system of the phase's processes; on a shared two-core machine the CPU figure stays comparable when the
# wall figure does not). With KVTIER_PHASES=FILE set (as .ci/run does) it also appends
# "NAME WALL_SECONDS STATUS CPU_SECONDS" there, so CI can print the breakdown and hold the tests to a budget.
#
#   toolchain/phase.sh NAME COMMAND [ARG ...]
set -uo pipefail

name=${1:?usage: phase.sh NAME COMMAND [ARG ...]}
shift
started=$SECONDS
"$@"
status=$?
elapsed=$((SECONDS - started))
times_file=$(mktemp)
times >"$times_file"  # into a file: in a pipe `times` would run in a subshell that has no children
cpu=$(sed -n 2p "$times_file" | tr -d 's' | awk '{split($1, u, "m"); split($2, y, "m"); printf "%d", u[1] * 60 + u[2] + y[1] * 60 + y[2]}')
rm -f "$times_file"
printf '[phase] %s: %d s, %d s of CPU (exit %d)\n' "$name" "$elapsed" "$cpu" "$status" >&2
if [[ -n ${KVTIER_PHASES:-} ]]; then printf '%s %d %d %d\n' "$name" "$elapsed" "$status" "$cpu" >>"$KVTIER_PHASES"; fi
exit "$status"
