"""kvtier.cluster.realnode.curvine_faults: how a fault's window of load ops is summed (the cluster side runs
in benchmarks/curvine_fault_bench.py), and that the load script the pods run is valid Python."""

from __future__ import annotations

from kvtier.cluster.realnode import curvine_faults


def _op(t: float, ok: bool = True, ms: float = 20.0, wrong: bool = False, op: str = "read", **extra) -> dict:
    line = {"t": t, "node": "n1", "op": op, "of": "other", "ok": ok, "wrong": wrong, "ms": ms}
    return line | extra


def test_unavailability_runs_from_the_first_bad_op_to_the_first_good_one_after_the_last() -> None:
    lines = [
        _op(0.0),
        _op(1.0, ok=False, errno=5, error="EIO: Input/output error"),
        _op(2.0),
        _op(3.0, ms=8000),  # ended well, but too slow to count as available
        _op(12.0),
        _op(13.0),
        _op(14.0, op="write"),
    ]
    out = curvine_faults.outage(lines, "read", "other", 0.5, 20.0)
    assert (out.ops, out.failed, out.wrong, out.unavailable_s, out.resumed) == (5, 1, 0, 11.0, True)
    assert out.errors == {"n1: EIO: Input/output error": 1} and out.slowest_ms == 8000


def test_wrong_bytes_are_counted_apart_from_failures_and_an_open_outage_runs_to_the_window_end() -> None:
    lines = [
        _op(1.0, ok=False, wrong=True, error="differ"),
        _op(1.5, ok=False, short=True, error="read 0 of 2097152 bytes"),
        _op(2.0, ok=False, error="EIO"),
    ]
    out = curvine_faults.outage(lines, "read", "other", 0.0, 10.0)
    assert (out.failed, out.wrong, out.short, out.unavailable_s, out.resumed) == (3, 1, 1, 9.0, False)


def test_a_quiet_window_has_no_outage() -> None:
    out = curvine_faults.outage([_op(1.0), _op(2.0)], "read", "other", 0.0, 10.0)
    assert (out.unavailable_s, out.failed, out.resumed) == (0.0, 0, True)


def test_the_load_script_compiles_for_a_node() -> None:
    compile(curvine_faults.load_script("real-node-2"), "load", "exec")


def test_the_load_tells_a_short_read_from_wrong_bytes(tmp_path) -> None:
    """The pods' own check, run here on two chunks: one cut short, one with a changed byte."""
    script = curvine_faults.load_script("n1").replace("/l2/ns", str(tmp_path))
    scope: dict = {}
    exec(script.split("latest = [None]")[0], scope)  # the helpers only, not the loops
    printed: list[dict] = []
    scope["say"] = lambda **fields: printed.append(fields)
    right = scope["expected"]("c")
    scope["timed"]("read", "other", lambda out: scope["named"](out, "c") and right[:4096])
    scope["timed"]("read", "other", lambda out: scope["named"](out, "c") and b"x" + right[1:])
    assert [(p["ok"], p.get("short"), p["wrong"]) for p in printed] == [
        (False, True, False),
        (False, False, True),
    ]
