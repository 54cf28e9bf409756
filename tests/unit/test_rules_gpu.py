"""The values rules on what vLLM makes of a model's dtype and memory share on its instance type's GPU:
bfloat16 below compute capability 8.0, float16 for the model types vLLM refuses it for, and weights (and one
max-model-len sequence of KV cache) within gpuMemoryUtilization of the GPU's memory."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvtier import paths
from kvtier.plan.capacity import known_config, known_model
from kvtier.plan.facts import COMPUTE_CAPABILITY, GIB, INSTANCE_TYPES
from kvtier.validate import catalogue
from kvtier.validate.checks.gpu_rules import BF16_MIN_CAPABILITY, FLOAT16_NOT_SUPPORTED, kv_bytes_per_gpu
from kvtier.validate.inputs import loader
from kvtier.validate.inputs.origins import Origins
from kvtier.validate.rules import ValuesContext

FIXTURES = Path(__file__).parents[1] / "fixtures" / "values"
GOOD = loader.load(FIXTURES / "good-minimal.yaml").data  # Qwen2-7B-Instruct float16 on ml.g6e.4xlarge
GPU_RULES = ("dtype-supported-by-gpu", "dtype-supported-by-model", "gpu-memory-holds-weights")


def _run(rule_id: str, values: dict[str, Any] | None = None, **model: Any) -> list[Any]:
    values = copy.deepcopy(GOOD if values is None else values)
    values["models"][0].update(model)
    loaded = loader.load_text(yaml.safe_dump(values, sort_keys=False), Path("env.yaml"))
    return catalogue.run_values(ValuesContext(loaded.data, loaded, origins=Origins([loaded])), only=[rule_id])


def _cpu() -> dict[str, Any]:
    values = copy.deepcopy(GOOD)
    values["engine"] = {"accelerator": "cpu"}
    return values


def _hyperpod() -> dict[str, Any]:
    values = copy.deepcopy(GOOD)
    values["target"] = "hyperpod"
    return values


# -- facts ------------------------------------------------------------------------------------------------


def test_every_instance_types_gpu_has_a_compute_capability() -> None:
    for name, (gpu, count, memory, host) in INSTANCE_TYPES.items():
        assert name.startswith("ml.") and gpu in COMPUTE_CAPABILITY, name
        assert count in (1, 4, 8) and 0 < memory < 96 and host >= 16, name


@pytest.mark.parametrize(
    ("instance", "gpu", "capability"),
    [
        ("ml.g4dn.xlarge", "T4", (7, 5)),
        ("ml.p3.2xlarge", "V100-16GB", (7, 0)),
        ("ml.g5.xlarge", "A10G", (8, 6)),
        ("ml.g6.xlarge", "L4", (8, 9)),
        ("ml.g6e.xlarge", "L40S", (8, 9)),
        ("ml.p4d.24xlarge", "A100-40GB", (8, 0)),
        ("ml.p4de.24xlarge", "A100-80GB", (8, 0)),
        ("ml.p5.48xlarge", "H100-80GB", (9, 0)),
    ],
)
def test_the_families_users_run_are_known(instance: str, gpu: str, capability: tuple[int, int]) -> None:
    assert INSTANCE_TYPES[instance][0] == gpu and COMPUTE_CAPABILITY[gpu] == capability


def test_g4dn_sizes() -> None:
    assert INSTANCE_TYPES["ml.g4dn.xlarge"] == ("T4", 1, 15.0, 16)
    assert INSTANCE_TYPES["ml.g4dn.12xlarge"] == ("T4", 4, 15.0, 192)


# -- dtype-supported-by-gpu --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("instance", "gpu", "capability"),
    [
        ("g4dn.xlarge", "T4", "7.5"),
        ("ml.g4dn.12xlarge", "T4", "7.5"),
        ("p3.2xlarge", "V100-16GB", "7.0"),
    ],
)
def test_bfloat16_below_compute_capability_8_is_refused(instance: str, gpu: str, capability: str) -> None:
    [finding] = _run("dtype-supported-by-gpu", dtype="bfloat16", instanceType=instance)
    assert finding.severity == "error" and finding.path == "models[0].dtype"
    assert f"bfloat16 on {instance}: its {gpu} GPU has compute capability {capability}" in finding.message
    assert "half" in finding.suggestion


@pytest.mark.parametrize("dtype", ["half", "float16", "float32", "float", "auto"])
def test_other_dtypes_on_a_t4_pass(dtype: str) -> None:
    # auto: vLLM falls back from a bfloat16 model's dtype to float16 with a warning (_resolve_auto_dtype)
    assert _run("dtype-supported-by-gpu", dtype=dtype, instanceType="g4dn.xlarge") == []


def test_a_model_without_dtype_is_auto() -> None:
    values = copy.deepcopy(GOOD)
    del values["models"][0]["dtype"]
    assert _run("dtype-supported-by-gpu", values, instanceType="g4dn.xlarge") == []


@pytest.mark.parametrize(
    "instance", ["ml.p4d.24xlarge", "g5.xlarge", "ml.g6.4xlarge", "ml.g6e.4xlarge", "p5.48xlarge"]
)
def test_bfloat16_from_compute_capability_8_passes(instance: str) -> None:
    assert _run("dtype-supported-by-gpu", dtype="bfloat16", instanceType=instance) == []


def test_the_boundary_is_compute_capability_8_0() -> None:
    assert BF16_MIN_CAPABILITY == (8, 0) and COMPUTE_CAPABILITY["A100-40GB"] == BF16_MIN_CAPABILITY
    assert COMPUTE_CAPABILITY["T4"] < BF16_MIN_CAPABILITY


def test_bfloat16_on_a_t4_is_refused_on_hyperpod_too() -> None:
    [finding] = _run("dtype-supported-by-gpu", _hyperpod(), dtype="bfloat16", instanceType="ml.g4dn.xlarge")
    assert finding.path == "models[0].dtype"


@pytest.mark.parametrize("instance", ["", "g4dn.metal-unknown", "m5.xlarge"])
def test_an_unknown_instance_type_is_not_judged(instance: str) -> None:
    assert _run("dtype-supported-by-gpu", dtype="bfloat16", instanceType=instance) == []


def test_the_cpu_engine_is_not_judged_on_its_instance_types_gpu() -> None:
    assert _run("dtype-supported-by-gpu", _cpu(), dtype="bfloat16", instanceType="g4dn.xlarge") == []


# -- dtype-supported-by-model ------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["google/gemma-2-9b-it", "google/gemma-2-9b", "gemma-2-9b"])
@pytest.mark.parametrize("dtype", ["float16", "half"])
def test_float16_for_gemma2_is_refused(model: str, dtype: str) -> None:
    [finding] = _run("dtype-supported-by-model", model=model, dtype=dtype)
    assert finding.severity == "error" and finding.path == "models[0].dtype"
    assert f"vLLM refuses float16 for {model} (model type 'gemma2'" in finding.message


@pytest.mark.parametrize("dtype", ["bfloat16", "auto", "float32", "float"])
def test_other_dtypes_for_gemma2_pass(dtype: str) -> None:
    assert _run("dtype-supported-by-model", model="google/gemma-2-9b-it", dtype=dtype) == []


def test_float16_for_other_model_types_passes() -> None:
    assert _run("dtype-supported-by-model", model="Qwen/Qwen2-7B-Instruct", dtype="float16") == []
    assert _run("dtype-supported-by-model", model="mistralai/Mistral-7B-v0.1", dtype="half") == []


def test_float16_is_refused_whatever_the_accelerator() -> None:
    # vLLM's _check_valid_dtype runs in the model config, before any platform check
    [finding] = _run("dtype-supported-by-model", _cpu(), model="google/gemma-2-9b-it", dtype="float16")
    assert finding.severity == "error"


def test_the_refused_model_types_are_vllms() -> None:
    assert set(FLOAT16_NOT_SUPPORTED) == {"gemma2", "gemma3", "gemma3_text", "glm4"}


@pytest.mark.parametrize(
    ("model", "gemma"), [("google/gemma-2-2b-jpn-it", "2"), ("google/gemma-3-4b-it", "3")]
)
def test_an_unshipped_gemma_2_or_3_by_name_is_a_warning(model: str, gemma: str) -> None:
    [finding] = _run("dtype-supported-by-model", model=model, dtype="float16")
    assert finding.severity == "warning" and f"looks like a Gemma {gemma} checkpoint" in finding.message


@pytest.mark.parametrize("model", ["google/gemma-2b", "google/gemma-3n-E4B-it", "google/gemma-7b"])
def test_other_gemmas_by_name_pass(model: str) -> None:
    # Gemma 1 (gemma) and Gemma 3n (gemma3n) are not model types vLLM refuses float16 for
    assert _run("dtype-supported-by-model", model=model, dtype="float16") == []


# -- gpu-memory-holds-weights ------------------------------------------------------------------------------


def test_weights_above_the_budget_are_refused() -> None:
    # Qwen2-7B: 7.6e9 parameters x 2 bytes = 14.2 GiB > 0.3 x 44.99 GiB (an L40S)
    [finding] = _run("gpu-memory-holds-weights", gpuMemoryUtilization=0.3)
    assert finding.severity == "error" and finding.path == "models[0].gpuMemoryUtilization"
    assert "0.3 gives vLLM 13.5 GiB of ml.g6e.4xlarge's 44.99 GiB L40S" in finding.message
    assert "weights in float16 take 14.2 GiB per GPU" in finding.message


@pytest.mark.parametrize(
    ("utilization", "severity"),
    [(0.31, "error"), (0.32, "error"), (0.325, "error"), (0.33, None), (0.9, None)],
)
def test_the_boundaries_of_weights_and_one_sequence(utilization: float, severity: str | None) -> None:
    # weights 14.18 GiB; one 8192-token sequence of fp16 KV is 0.4375 GiB: 0.325 leaves 0.4372 GiB
    findings = _run("gpu-memory-holds-weights", gpuMemoryUtilization=utilization)
    assert [f.severity for f in findings] == ([severity] if severity else [])


def test_a_short_max_model_len_fits_what_is_left() -> None:
    assert _run("gpu-memory-holds-weights", gpuMemoryUtilization=0.325, maxModelLen=4096) == []
    [finding] = _run("gpu-memory-holds-weights", gpuMemoryUtilization=0.32, maxModelLen=8192)
    assert "less than the 0.44 GiB of KV cache one 8192-token sequence" in finding.message


def test_an_fp8_kv_cache_needs_half_the_room() -> None:
    fp8 = ["--kv-cache-dtype", "fp8"]
    assert _run("gpu-memory-holds-weights", gpuMemoryUtilization=0.325, extraArgs=fp8) == []


def test_without_max_model_len_the_models_context_is_needed_a_warning() -> None:
    values = copy.deepcopy(GOOD)
    del values["models"][0]["maxModelLen"]
    # 32768 tokens (max_position_embeddings) x 57344 B = 1.75 GiB; 0.35 x 44.99 - 14.18 = 1.56 GiB left
    [finding] = _run("gpu-memory-holds-weights", values, gpuMemoryUtilization=0.35)
    assert finding.severity == "warning" and "one 32768-token sequence" in finding.message


def test_a_max_model_len_the_kv_cache_cannot_hold_is_refused() -> None:
    # vllm-project/vllm issue 10517 (and SubgraphRAG issue 19): Llama-3.1-8B at its 131072 positions on a
    # 24 GB GPU. 8.0e9 parameters x 2 B = 14.96 GiB of 0.9 x 22.49 GiB (an L4) leaves 5.28 GiB; one
    # 131072-token sequence takes 131072 x 131072 B = 16 GiB (32 layers x 8 KV heads x 128 x 2 x 2 B a token)
    llama = {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "dtype": "bfloat16",
        "instanceType": "ml.g6.2xlarge",
    }
    [finding] = _run("gpu-memory-holds-weights", gpuMemoryUtilization=0.9, maxModelLen=131072, **llama)
    assert finding.severity == "error" and finding.path == "models[0].gpuMemoryUtilization"
    assert "5.28 GiB is left, less than the 16.00 GiB of KV cache one 131072-token" in finding.message
    # the report's 20000 tokens served: 2.4 GiB
    assert _run("gpu-memory-holds-weights", gpuMemoryUtilization=0.9, maxModelLen=16384, **llama) == []


@pytest.mark.parametrize(
    "args",
    [
        ["--decode-context-parallel-size", "2"],
        ["-dcp", "2"],
        ["--prefill-context-parallel-size=2"],
        ["--num-gpu-blocks-override", "4096"],
        ["--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "0,1"],
        ["--kv-cache-dtype", "int4_per_token_head"],
    ],
)
def test_what_splits_or_resizes_the_kv_cache_leaves_a_warning(args: list[str]) -> None:
    [finding] = _run("gpu-memory-holds-weights", gpuMemoryUtilization=0.32, extraArgs=args)
    assert finding.severity == "warning"


def test_an_fp8_kv_cache_shortfall_is_still_certain() -> None:
    # one 8192-token sequence in fp8 is 0.22 GiB; 0.318 x 44.99 - 14.18 = 0.13 GiB
    [finding] = _run(
        "gpu-memory-holds-weights", gpuMemoryUtilization=0.318, extraArgs=["--kv-cache-dtype", "fp8_e4m3"]
    )
    assert finding.severity == "error"


@pytest.mark.parametrize(
    "extra",
    [
        {"layer_types": ["linear_attention", "full_attention"] * 14},
        {"layers_block_type": ["mamba", "attention"] * 14},
        {"mamba_d_state": 128},
        # sliding-window layers keep only the window's tokens (Mistral 7B v0.1, Gemma 2 and 3)
        {"sliding_window": 4096, "use_sliding_window": True},
        {"sliding_window": 4096, "layer_types": ["sliding_attention", "full_attention"] * 14},
        {"interleaved_sliding_window": 1024},
    ],
)
def test_a_hybrid_models_shortfall_is_a_warning(tmp_path: Path, extra: dict[str, Any]) -> None:
    # layers that keep a fixed-size state (Mamba, linear attention) take no per-token KV: the count is an
    # upper bound there, not the lower bound an error needs
    config = dict(known_config("Qwen/Qwen2-7B-Instruct")[1], **extra)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    values = copy.deepcopy(GOOD)
    values["models"][0]["gpuMemoryUtilization"] = 0.32
    loaded = loader.load_text(yaml.safe_dump(values, sort_keys=False), Path("env.yaml"))
    context = ValuesContext(
        loaded.data, loaded, origins=Origins([loaded]), model_configs={"Qwen/Qwen2-7B-Instruct": path}
    )
    [finding] = catalogue.run_values(context, only=["gpu-memory-holds-weights"])
    assert finding.severity == "warning"


def test_without_utilization_vllms_default_applies() -> None:
    values = copy.deepcopy(GOOD)
    values["models"][0].pop("gpuMemoryUtilization", None)
    assert _run("gpu-memory-holds-weights", values) == []
    # the T4's 15 GiB x 0.9 = 13.5 GiB: Qwen2-7B's weights do not fit
    [finding] = _run("gpu-memory-holds-weights", values, instanceType="g4dn.xlarge")
    assert finding.severity == "error" and "0.9 gives vLLM 13.5 GiB" in finding.message


def test_tensor_parallel_spreads_the_weights() -> None:
    assert _run("gpu-memory-holds-weights", gpuMemoryUtilization=0.2, instanceType="ml.g6e.12xlarge") != []
    spread = {"gpuMemoryUtilization": 0.2, "instanceType": "ml.g6e.12xlarge", "gpusPerReplica": 2}
    assert _run("gpu-memory-holds-weights", **spread) == []


def test_pipeline_parallel_spreads_the_weights() -> None:
    args = ["--pipeline-parallel-size", "2"]
    assert _run("gpu-memory-holds-weights", gpuMemoryUtilization=0.2, extraArgs=args) == []


def test_auto_resolves_as_vllm_does() -> None:
    # Gemma 2 (float32 config, no float16) on a T4 (no bfloat16): vLLM's auto runs it in float32
    [finding] = _run(
        "gpu-memory-holds-weights", model="google/gemma-2-9b-it", dtype="auto", instanceType="g4dn.12xlarge"
    )
    assert "weights in float32 take 34.4 GiB" in finding.message
    # on an A10G auto is bfloat16: 17.2 GiB of 0.9 x 22.49 GiB, and one 8192-token sequence fits
    assert (
        _run("gpu-memory-holds-weights", model="google/gemma-2-9b-it", dtype="auto", instanceType="g5.xlarge")
        == []
    )


@pytest.mark.parametrize(
    "args",
    [
        ["--quantization", "awq"],
        ["-q", "fp8"],
        ["--quant=fp8"],
        ["--cpu-offload-gb", "10"],
        ["--kv-cache-memory-bytes", "2G"],
        ["--config", "/etc/vllm.yaml"],
    ],
)
def test_flags_that_change_the_sizes_leave_it_unjudged(args: list[str]) -> None:
    assert _run("gpu-memory-holds-weights", gpuMemoryUtilization=0.3, extraArgs=args) == []


def test_unknown_models_instance_types_and_the_cpu_engine_are_not_judged() -> None:
    assert _run("gpu-memory-holds-weights", gpuMemoryUtilization=0.3, model="Qwen/Qwen2-0.5B-Instruct") == []
    assert _run("gpu-memory-holds-weights", gpuMemoryUtilization=0.3, instanceType="") == []
    assert _run("gpu-memory-holds-weights", _cpu(), gpuMemoryUtilization=0.3) == []


def test_hyperpod_is_judged_the_same_way() -> None:
    [finding] = _run("gpu-memory-holds-weights", _hyperpod(), gpuMemoryUtilization=0.3)
    assert finding.severity == "error"


def test_kv_per_gpu_follows_vllms_sharding() -> None:
    qwen = known_model("qwen2-7b")
    assert qwen is not None
    whole = kv_bytes_per_gpu(qwen, 2, 1000, 1, 1)
    assert whole == 1000 * qwen.kv_bytes_per_token(2)
    assert kv_bytes_per_gpu(qwen, 2, 1000, 2, 1) == whole / 2  # 4 KV heads over 2 ranks
    assert kv_bytes_per_gpu(qwen, 2, 1000, 8, 1) == whole / 4  # 4 KV heads: each of 8 ranks holds one
    gemma = known_model("gemma-2-9b")
    assert gemma is not None
    per_layer = gemma.kv_bytes_per_token(2) / gemma.layers
    # 21 full layers at 8192 tokens, 21 sliding ones at the 4096-token window
    assert kv_bytes_per_gpu(gemma, 2, 8192, 1, 1) == per_layer * (21 * 8192 + 21 * 4096)
    deepseek = known_model("deepseek-v2-lite")
    assert deepseek is not None
    assert kv_bytes_per_gpu(deepseek, 2, 100, 4, 1) == 100 * deepseek.kv_bytes_per_token(2)  # MLA: whole
    assert whole / GIB < 1


@pytest.mark.parametrize("rule_id", GPU_RULES)
def test_every_environment_passes(rule_id: str) -> None:
    for file in sorted((paths.ROOT / "values").glob("*.yaml")):
        loaded = loader.load(file)
        context = ValuesContext(loaded.data, loaded, origins=Origins([loaded]))
        assert catalogue.run_values(context, only=[rule_id]) == [], file.name
