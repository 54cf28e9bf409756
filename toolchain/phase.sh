#!/usr/bin/env bash
# Runs one phase of `make test` and logs its wall time; with KVTIER_PHASES=FILE set (as .ci/run does) it
# also appends "NAME SECONDS STATUS" there, so CI can print the breakdown and hold the tests to a budget.
#
#   toolchain/phase.sh NAME COMMAND [ARG ...]
set -uo pipefail

name=${1:?usage: phase.sh NAME COMMAND [ARG ...]}
shift
started=$SECONDS
"$@"
status=$?
elapsed=$((SECONDS - started))
printf '[phase] %s: %d s (exit %d)\n' "$name" "$elapsed" "$status" >&2
if [[ -n ${KVTIER_PHASES:-} ]]; then printf '%s %d %d\n' "$name" "$elapsed" "$status" >>"$KVTIER_PHASES"; fi
exit "$status"
