"""The plan of each model as plain data: tier capacities, per-prompt times, the break-even length.

`build` is what `kvtier plan` prints (report.py) or writes as JSON; every number comes from capacity.py.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from kvtier.plan import capacity, prefill
from kvtier.plan.capacity import Deployment, Timing
from kvtier.plan.facts import GIB, REFERENCE


@dataclass(frozen=True)
class ReadSpeed:
    """A cross-node L2 read speed the plan compares: its name, GiB/s and where the figure comes from."""

    name: str  # "reference", "measured", "given"
    gib_s: float
    source: str


def read_speeds(d: Deployment, timing: Timing, speeds: list[ReadSpeed]) -> list[dict[str, Any]]:
    """Each speed's break-even prompt length and one chunk's read against its prefill, on `timing`'s other
    terms."""
    bpt = d.model.kv_bytes_per_token(d.kv_dtype_bytes)
    out = []
    for s in speeds:
        at = replace(timing, read_gib_s=s.gib_s)
        read_ms, prefill_ms = capacity.chunk_read_and_prefill_ms(d, at)
        out.append(
            {
                "name": s.name,
                "gib_s": s.gib_s,
                "source": s.source,
                "break_even_tokens": at.break_even_tokens(bpt),
                "chunk_read_ms": read_ms,
                "chunk_prefill_ms": prefill_ms,
            }
        )
    return out


def build(
    inputs: list[tuple[str, Deployment]],
    timing: Timing,
    prompt_tokens: list[int],
    activation_gib: float,
    reference_check: bool,
    speeds: list[ReadSpeed] | None = None,
    read_source: str = "",
) -> dict[str, Any]:
    """One entry per (label, deployment); `activation_gib` is subtracted from L0 when given; `speeds` are
    compared side by side, `read_source` says where timing's read speed comes from."""
    for _, d in inputs:
        d.activation_gib = activation_gib
        if not activation_gib:
            d.notes.append(
                "L0 = GPU memory x utilisation - weights; vLLM also keeps activations and CUDA graphs "
                "(1-4 GiB per GPU, profiled at start): give --activation-gib to subtract them"
            )
    out: dict[str, Any] = {"units": "GiB = 2^30 bytes; bandwidth GiB/s; time ms", "models": []}
    reference_timing = timing
    for label, d in inputs:
        # the reference's prefill rate, estimated for this model and GPU (a measured or given rate stays)
        timing, estimate = prefill.timing_for(d, reference_timing)
        bpt = d.model.kv_bytes_per_token(d.kv_dtype_bytes)
        caps = capacity.capacities(d)
        entry = {
            "name": label,
            "model": d.model.name,
            "layers": d.model.layers,
            "kv_heads": d.model.kv_heads,
            "head_dim": d.model.head_dim,
            "kv_dtype_bytes": d.kv_dtype_bytes,
            "kv_bytes_per_token": bpt,
            "kv_formula": d.model.kv_formula(d.kv_dtype_bytes),
            "params": d.model.params,
            "notes": d.model.notes() + d.notes,
            "replicas": d.replicas,
            "backend": d.backend,
            "chunk_tokens": d.chunk,
            "chunk_file_bytes": capacity.chunk_file_bytes(d),
            "tiers": {
                t: {**v, "prompts": {n: v["tokens"] / n for n in prompt_tokens}}
                for t, v in caps.items()
                if t != "weights"
            },
            "weights_gib": caps["weights"]["bytes"] / GIB,
            "prompts": [capacity.prompt_row(d, timing, n) for n in prompt_tokens],
            "break_even_tokens": timing.break_even_tokens(bpt),
            "l2_read_speeds": read_speeds(d, timing, speeds or []),
            "timing": {
                "request_ms": timing.request_ms,
                "hit_ms": timing.hit_ms,
                "prefill_tps": timing.prefill_tps,
                "read_gib_s": timing.read_gib_s,
                "read_source": read_source,
                "write_gib_s": timing.write_gib_s,
                "calibration": timing.source,
            },
            "prefill_estimate": estimate.as_dict() if estimate else None,
        }
        if reference_check:
            # the reference's speedups were measured at its own read speed, whatever the plan's is
            at_reference = replace(reference_timing, read_gib_s=REFERENCE.l2_read_gib_s)
            entry["reference_check"] = capacity.reference_check(at_reference, bpt)
        out["models"].append(entry)
    return out
