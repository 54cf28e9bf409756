"""Whether a cross-node L2 hit can beat recomputing, at the read speed this bundle's Curvine was measured at.

The arithmetic is the planner's (kvtier.plan: the model's KV bytes per token, the chunk file's bytes, the
reference's prefill rate estimated for the model and GPU by kvtier.plan.prefill,
capacity.chunk_read_and_prefill_ms); the read speed is the measured entry
for the values' Curvine read settings (kvtier.plan.readspeed). The criterion is per chunk: L2 is written and
read one chunk file at a time, so where one chunk's read takes longer than prefilling its tokens, no prompt
length gains from a cross-node hit (each chunk loses, and a hit's fixed cost only adds): the warm-up
prefixes, the router's prefix threshold and maxModelLen all lose alike. docs/validate.md, docs/performance.md.
"""

from __future__ import annotations

from collections.abc import Iterator

from kvtier.errors import UserError
from kvtier.plan import capacity, prefill, readspeed
from kvtier.plan import inputs as plan_inputs
from kvtier.plan.capacity import ModelSpec
from kvtier.plan.facts import REFERENCE
from kvtier.validate import model_facts
from kvtier.validate.rules import Hit, ValuesContext, rule
from kvtier.values import lookup, model_entries


@rule(
    "l2-read-slower-than-recompute",
    reason="at the cross-node read speed this bundle's Curvine was measured at (tools/kvtier/facts/"
    "curvine_read.yaml), reading one chunk's KV from another node's L2 takes longer than prefilling its "
    "tokens on the chosen GPU (the reference's prefill rate scaled to the model's compute per token and the "
    "GPU's tensor throughput), so a cross-node L2 hit of any prompt length is slower than recomputing it",
    remedy="measure on your own cluster first (`kvtier bench --release <name>` with two replicas on two "
    "nodes: B's L2 hit of what A computed against a cold prefill, by prompt length); if it holds there, "
    "choose faster Curvine read settings (curvine.config.read), keep requests on the replica that holds "
    "their prefix (routing.strategy prefixaware) or leave cache.l2 off for this model",
)
def l2_read_slower_than_recompute(ctx: ValuesContext) -> Iterator[Hit]:
    """A warning, never an error: the figure is this project's machine (loopback on a small VM), not the
    user's network."""
    values = ctx.values
    if not (lookup(values, "cache", "l2", "enabled", default=False) and lookup(values, "curvine", "enabled")):
        return
    measured = readspeed.measured_read(values)
    reference = capacity.reference_timing(measured.gib_s)
    for i, model in model_entries(values):
        found = model_facts.find(model, ctx.model_configs)
        if found is None:
            continue  # an unknown model: model-facts-source says so
        try:
            spec = ModelSpec.from_hf_config(found.name, found.config, found.origin)
            d = plan_inputs.deployment(values, model, spec)
            timing, estimate = prefill.timing_for(d, reference, found.rests_on(*prefill.MODEL_KEYS))
            read_ms, prefill_ms = capacity.chunk_read_and_prefill_ms(d, timing)
        except (UserError, OverflowError):
            continue  # a size or config the schema and the model rules report (a chunk of 1e308 tokens)
        assert estimate is not None  # the reference's timing: always estimated
        if read_ms <= prefill_ms:
            continue
        file_bytes = capacity.chunk_file_bytes(d)
        gpu = f"{d.gpus_per_replica} x {d.gpu}" if d.gpu else f"instance type {model.get('instanceType')!r}"
        yield Hit(
            f"models[{i}] ({model.get('model')}): one {d.chunk}-token chunk's L2 file ({file_bytes:,} B, "
            f"{d.model.kv_bytes_per_token(d.kv_dtype_bytes):,} B of KV a token) read across nodes at "
            f"{measured.gib_s:g} GiB/s takes {read_ms:.1f} ms, longer than prefilling its {d.chunk} tokens "
            f"({prefill_ms:.1f} ms on {gpu} at {timing.prefill_tps:,.0f} tokens/s: {estimate.describe()}), "
            "so no prompt this model serves is answered faster "
            f"from another node's L2 than recomputed (the reference deployment read at "
            f"{REFERENCE.l2_read_gib_s:g} GiB/s). Read speed: {measured.describe()}. A warning, not an "
            f"error: these are not your nodes; {readspeed.MEASURE_YOURS} to `kvtier plan` with "
            "--cold-ttft-ms from the same run",
            ("models", i, "model"),
            severity="warning",
        )
