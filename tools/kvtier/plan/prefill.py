"""The prefill rate on the deployment's model and GPU: the reference's measured rate, scaled by compute.

A roofline-style estimate, not a measurement. Prefill of a prompt is bound by matrix arithmetic, so its rate
is taken to be proportional to the GPU's peak dense FP16/BF16 tensor throughput (times the tensor-parallel
size) and inversely proportional to the FLOPs one prompt token costs:

    rate = reference rate x (reference FLOPs/token / model FLOPs/token)
                          x (GPU TFLOPS x tensor parallel / reference GPU TFLOPS)

FLOPs per token = 2 x non-embedding parameters (a multiply and an add per weight) + 4 x layers x query width
x context (attention's score and weighted-sum products over the earlier tokens; the context is the average a
token of the reference's 2,500-token prompt sees under the causal mask, 1,250).

Each term falls back to the reference's (a factor of 1) where its figures are missing or not confirmed
against a published file (kvtier.facts), and the estimate says which and why; a mixture-of-experts model
keeps the reference's model term (its compute per token follows the routed experts, not modelled here).
What it leaves out: efficiency differences between GPUs and kernels, memory bandwidth, tensor-parallel
communication, per-request overheads (kept from the reference), sliding windows. docs/performance.md,
"The L2 read speed the plan assumes".
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvtier import facts
from kvtier.plan.capacity import Deployment, ModelSpec, Timing, known_model
from kvtier.plan.facts import REFERENCE

# the average context one token of the reference's calibration prompt attends to (causal mask)
REFERENCE_CONTEXT = REFERENCE.ttft_tokens // 2
# the config.json keys the model term rests on (a shipped entry must have them confirmed)
MODEL_KEYS = (
    "num_hidden_layers",
    "num_attention_heads",
    "hidden_size",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "tie_word_embeddings",
    "num_parameters",
)


def flops_per_token(spec: ModelSpec, context: int = REFERENCE_CONTEXT) -> float:
    """Forward FLOPs of one prompt token that attends to `context` earlier tokens."""
    return 2 * (spec.params - spec.embedding_params) + 4 * spec.layers * spec.attention_width * context


def shipped_doubt(name: str) -> str:
    """The MODEL_KEYS a shipped model's entry leaves unconfirmed, in words ("" if none or not shipped)."""
    entry = facts.models().get(name)
    doubtful = entry.unconfirmed_of(MODEL_KEYS) if entry else []
    if entry and "*" in entry.unconfirmed and not doubtful:
        doubtful = ["every key"]
    return f"{name}'s shipped {', '.join(doubtful)}" if doubtful else ""


@dataclass(frozen=True)
class Prefill:
    """The estimated prefill rate and how it was made."""

    tokens_per_s: float
    reference_tps: float
    model_factor: float  # 1.0 where the model term fell back
    gpu_factor: float  # 1.0 where the GPU term fell back
    model_note: str  # the figures, or why the reference's term was kept
    gpu_note: str
    fell_back: bool  # either term kept the reference's

    def describe(self) -> str:
        return (
            f"{self.tokens_per_s:,.0f} tokens/s = the reference's {self.reference_tps:,.0f} (Qwen2-7B on one "
            f"A10G) x model {self.model_factor:.3g} ({self.model_note}) x GPU {self.gpu_factor:.3g} "
            f"({self.gpu_note}); a roofline-style estimate, not a measurement"
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "tokens_per_s": self.tokens_per_s,
            "reference_tps": self.reference_tps,
            "model_factor": self.model_factor,
            "gpu_factor": self.gpu_factor,
            "model_note": self.model_note,
            "gpu_note": self.gpu_note,
            "fell_back": self.fell_back,
            "description": self.describe(),
        }


def _model_term(spec: ModelSpec, doubt: str) -> tuple[float | None, str]:
    reference = known_model(REFERENCE.model)
    assert reference is not None  # shipped: tests/unit/test_prefill_model.py
    if spec.experts:
        return (
            None,
            f"{spec.name} is a mixture of experts: compute per token not modelled, the reference's kept",
        )
    doubts = facts.doubts(doubt, shipped_doubt(REFERENCE.model))
    if doubts:
        return None, f"rests on unconfirmed {doubts}: the reference's kept"
    mine, theirs = flops_per_token(spec), flops_per_token(reference)
    return theirs / mine, f"{spec.name} {mine / 1e9:.1f} GFLOP a token vs Qwen2-7B's {theirs / 1e9:.1f}"


def _gpu_figure(name: str) -> tuple[float | None, str]:
    """(dense FP16/BF16 TFLOPS, "") where confirmed, else (None, why not)."""
    gpu = facts.gpus().get(name)
    if gpu is None:
        return None, f"{name or 'the GPU'} is not in the shipped facts"
    if gpu.dense_fp16_tflops is None:
        return None, f"the {name}'s dense FP16 TFLOPS are not known"
    if not gpu.dense_fp16_tflops_confirmed:
        return None, f"the {name}'s {gpu.dense_fp16_tflops:g} dense FP16 TFLOPS are unconfirmed"
    return gpu.dense_fp16_tflops, ""


def _gpu_term(gpu: str, tensor_parallel: int) -> tuple[float | None, str]:
    if gpu == REFERENCE.gpu:  # the same GPU: only the tensor-parallel size differs, no figure needed
        return float(tensor_parallel), f"{tensor_parallel} x {gpu}, the reference's GPU"
    if not gpu:
        return None, "GPU not known (an instance type outside the shipped facts): the reference's kept"
    mine, why = _gpu_figure(gpu)
    theirs, why_reference = _gpu_figure(REFERENCE.gpu)
    if mine is None or theirs is None:
        return None, f"{why or why_reference}: the reference's GPU term kept"
    return (
        mine * tensor_parallel / theirs,
        f"{tensor_parallel} x {gpu} at {mine:g} dense FP16 TFLOPS vs the {REFERENCE.gpu}'s {theirs:g}",
    )


def estimate(
    reference_tps: float, spec: ModelSpec, gpu: str, tensor_parallel: int = 1, model_doubt: str = ""
) -> Prefill:
    """The prefill rate of `spec` on `tensor_parallel` x `gpu`; `model_doubt` names the unconfirmed figures
    of the model's config (as ModelFacts.rests_on says them), if any."""
    model, model_note = _model_term(spec, model_doubt)
    gpu_factor, gpu_note = _gpu_term(gpu, max(tensor_parallel, 1))
    m, g = model if model is not None else 1.0, gpu_factor if gpu_factor is not None else 1.0
    return Prefill(
        reference_tps * m * g, reference_tps, m, g, model_note, gpu_note, model is None or gpu_factor is None
    )


def timing_for(
    d: Deployment, timing: Timing, model_doubt: str | None = None
) -> tuple[Timing, Prefill | None]:
    """`timing` with the prefill rate estimated for the deployment's model and GPU, where its rate is the
    reference's; a rate the user measured or gave stays as it is (None: no estimate made).
    `model_doubt` None: the shipped entry of the model's name, if any, says what is unconfirmed."""
    if not timing.reference_prefill:
        return timing, None
    doubt = shipped_doubt(d.model.name) if model_doubt is None else model_doubt
    found = estimate(timing.prefill_tps, d.model, d.gpu, d.gpus_per_replica, doubt)
    return replace(timing, prefill_tps=found.tokens_per_s), found
