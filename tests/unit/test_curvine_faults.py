"""kvtier.cluster.realnode.curvine_faults: how a fault's window of load ops is summed (the cluster side runs
in benchmarks/curvine_fault_bench.py), and that the load script the pods run is valid Python."""

from __future__ import annotations

from kvtier.cluster.realnode import curvine_faults


def _op(
    t: float,
    ok: bool = True,
    ms: float = 20.0,
    wrong: bool = False,
    op: str = "read",
    node: str = "n1",
    **extra,
) -> dict:
    line = {"t": t, "node": node, "op": op, "of": "other", "ok": ok, "wrong": wrong, "ms": ms}
    return line | extra


def test_unavailability_is_the_time_spent_in_failing_or_stalled_ops_on_the_worse_node() -> None:
    lines = [
        _op(0.0),
        _op(1.0, ok=False, errno=5, error="EIO: Input/output error"),  # bad until the next op, 2.0
        _op(2.0),
        _op(3.0, ms=8000),  # ended well, but too slow to count as available: 3.0 to the next op, 12.0
        _op(12.0, ok=False, short=True, error="read 0 of 2097152 bytes"),  # a short read: counted apart
        _op(13.0),
        _op(14.0, op="write"),
        _op(1.0, node="n2", ok=False, error="EIO"),  # the other node: 1.0 to 1.5 only
        _op(1.5, node="n2"),
    ]
    out = curvine_faults.outage(lines, "read", "other", 0.5, 20.0)
    assert (out.ops, out.failed, out.short, out.wrong, out.unavailable_s, out.resumed) == (
        7,
        3,
        1,
        0,
        10.0,
        True,
    )
    assert out.errors["n1: EIO: Input/output error"] == 1 and out.slowest_ms == 8000


def test_an_op_stalled_across_the_window_counts_and_wrong_bytes_apart_from_failures() -> None:
    lines = [
        _op(-30.0, ms=45_000),  # started before the window, still hanging 15 s into it
        _op(15.0, ok=False, wrong=True, error="differ"),
        _op(16.0, ok=False, error="EIO"),  # the last op, 20 ms: not resumed
    ]
    out = curvine_faults.outage(lines, "read", "other", 0.0, 20.0)
    assert (out.ops, out.failed, out.wrong, out.unavailable_s, out.resumed) == (2, 2, 1, 16.0, False)


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
