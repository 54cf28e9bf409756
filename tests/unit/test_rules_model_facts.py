"""What validate knows of a model, an instance type's store and a StorageClass, and the rules that judge with
it: --model-config (a config.json or a model folder with its safetensors index), a local Hugging Face cache
laid out as huggingface_hub lays it out, the shipped facts (gating, context), the Curvine workers' instance
store and the L2 class's provisioner. Every test points HF_HUB_CACHE at its own folder: nothing of the
user's cache is read, nothing is downloaded."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import hub_stand_in, model_configs
from kvtier import cli, exitcodes, facts, paths
from kvtier.errors import UserError
from kvtier.plan.facts import GIB, INSTANCE_STORE_GB, INSTANCE_TYPES, KNOWN_MODELS
from kvtier.upstream import storage_provisioners
from kvtier.validate import catalogue, model_facts
from kvtier.validate.findings import Finding
from kvtier.validate.inputs import loader
from kvtier.validate.layers import storage_classes
from kvtier.validate.rules import ValuesContext

FIXTURES = Path(__file__).parents[1] / "fixtures" / "values"
GOOD = loader.load(FIXTURES / "good-minimal.yaml").data  # Qwen2-7B-Instruct on ml.g6e.4xlarge, Curvine on
# /opt/dlami/nvme 500GB
PRIVATE = "acme/private-13b"
PRIVATE_CONFIG = model_configs.DENSE_13B


@pytest.fixture(autouse=True)
def _own_hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return hub_stand_in.own_hub_cache(tmp_path, monkeypatch)


def _model_folder(where: Path, config: dict[str, Any], total_size: int | None = None) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    (where / "config.json").write_text(json.dumps(config))
    if total_size is not None:
        index = {"metadata": {"total_size": total_size}, "weight_map": {}}
        (where / "model.safetensors.index.json").write_text(json.dumps(index))
    return where


def _cache_snapshot(cache: Path, repo: str, commit: str, config: dict[str, Any], ref: str = "main") -> Path:
    repo_dir = cache / ("models--" + repo.replace("/", "--"))
    (repo_dir / "refs").mkdir(parents=True, exist_ok=True)
    (repo_dir / "refs" / ref).write_text(commit)
    return _model_folder(repo_dir / "snapshots" / commit, config)


def _values(**model: Any) -> dict[str, Any]:
    values = copy.deepcopy(GOOD)
    values["models"][0].update(model)
    return values


def _run(rule_id: str, values: dict[str, Any], given: dict[str, Path] | None = None) -> list[Finding]:
    loaded = loader.load_text(yaml.safe_dump(values, sort_keys=False), Path("env.yaml"))
    ctx = ValuesContext(loaded.data, loaded, model_configs=given or {})
    return catalogue.run_values(ctx, only=[rule_id])


# -- where the facts come from -----------------------------------------------------------------------------


def test_a_model_folder_gives_the_config_and_the_weight_bytes(tmp_path: Path) -> None:
    folder = _model_folder(tmp_path / "private", PRIVATE_CONFIG, total_size=26_031_728_640)
    facts = model_facts.find({"model": PRIVATE}, {PRIVATE: folder})
    assert facts is not None and facts.weight_bytes == 26_031_728_640
    assert facts.config["max_position_embeddings"] == 4096 and facts.origin == str(folder)
    # the config.json itself reads the index beside it too
    again = model_facts.find({"model": PRIVATE}, {PRIVATE: folder / "config.json"})
    assert again is not None and again.weight_bytes == 26_031_728_640


def test_a_config_for_another_model_is_not_used(tmp_path: Path) -> None:
    folder = _model_folder(tmp_path / "private", PRIVATE_CONFIG)
    assert model_facts.find({"model": "acme/other"}, {PRIVATE: folder}) is None


def test_a_config_without_a_model_stands_only_for_models_without_facts(tmp_path: Path) -> None:
    folder = _model_folder(tmp_path / "private", PRIVATE_CONFIG)
    anyone = {model_facts.ANY_MODEL: folder}
    unknown = model_facts.find({"model": "acme/other"}, anyone)
    assert unknown is not None and unknown.config["hidden_size"] == 5120
    shipped = model_facts.find({"model": "Qwen/Qwen2-7B-Instruct"}, anyone)
    assert shipped is not None and shipped.origin == "shipped" and shipped.config["hidden_size"] == 3584


def test_the_hub_cache_is_read_at_the_revision_then_main(_own_hub_cache: Path) -> None:
    main = _cache_snapshot(_own_hub_cache, PRIVATE, "a" * 40, PRIVATE_CONFIG)
    pinned = _cache_snapshot(
        _own_hub_cache, PRIVATE, "b" * 40, {**PRIVATE_CONFIG, "max_position_embeddings": 8192}, ref="v2"
    )
    facts = model_facts.find({"model": PRIVATE}, {})
    assert facts is not None and facts.origin == str(main / "config.json")
    by_tag = model_facts.find({"model": PRIVATE, "source": {"huggingface": {"revision": "v2"}}}, {})
    assert by_tag is not None and by_tag.config["max_position_embeddings"] == 8192
    by_commit = model_facts.find({"model": PRIVATE, "source": {"huggingface": {"revision": "b" * 40}}}, {})
    assert by_commit is not None and by_commit.origin == str(pinned / "config.json")


def test_an_unreadable_cached_config_leaves_the_model_unknown(_own_hub_cache: Path) -> None:
    snapshot = _cache_snapshot(_own_hub_cache, PRIVATE, "c" * 40, PRIVATE_CONFIG)
    (snapshot / "config.json").write_text("{not json")
    assert model_facts.find({"model": PRIVATE}, {}) is None


def test_a_local_model_folder_is_read(tmp_path: Path) -> None:
    folder = _model_folder(tmp_path / "models" / "private", PRIVATE_CONFIG, total_size=10**9)
    facts = model_facts.find({"model": str(folder)}, {})
    assert facts is not None and facts.weight_bytes == 10**9


def test_a_given_path_that_is_not_a_config_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"no config\.json there"):
        model_facts.parse_flag(f"{PRIVATE}={tmp_path / 'missing'}")
    (tmp_path / "bad.json").write_text('{"num_hidden_layers": "forty"}')
    with pytest.raises(UserError, match="num_hidden_layers"):
        model_facts.parse_flag(str(tmp_path / "bad.json"))
    with pytest.raises(UserError, match=r"expected \[MODEL=\]PATH"):
        model_facts.parse_flag(f"{PRIVATE}=")
    # a FIFO is refused, or passed over as an index, and never read (a read would hang)
    os.mkfifo(tmp_path / "fifo.json")
    with pytest.raises(UserError, match=r"no config\.json there"):
        model_facts.parse_flag(str(tmp_path / "fifo.json"))
    folder = _model_folder(tmp_path / "with-fifo-index", PRIVATE_CONFIG)
    os.mkfifo(folder / "model.safetensors.index.json")
    assert model_facts.parse_flag(f"{PRIVATE}={folder}") == (PRIVATE, folder)
    assert model_facts.read_given(folder)[1] is None


@pytest.mark.parametrize(
    ("repo", "gated"),
    [
        ("meta-llama/Llama-3.2-3B-Instruct", True),
        ("meta-llama/Llama-3.3-70B-Instruct", True),
        ("google/gemma-2-27b-it", True),
        ("Qwen/Qwen3-8B", None),
        # gated on the Hub: TransformerLensOrg/TransformerLens PR 769, modal-labs/modal-examples issue 703
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", True),
        # vllm-project/vllm PR 3963: 401 "Cannot access gated repo" for meta-llama/Llama-2-7b-hf
        ("meta-llama/Llama-2-7b-hf", True),
        ("meta-llama/Llama-2-13b-chat-hf", True),
    ],
)
def test_the_shipped_facts_say_which_repositories_are_gated(repo: str, gated: bool | None) -> None:
    facts = model_facts.find({"model": repo}, {})
    assert facts is not None and facts.gated is gated


def test_every_shipped_model_reads_as_a_config() -> None:
    for name, (ids, _config) in KNOWN_MODELS.items():
        facts = model_facts.find({"model": ids[0]}, {})
        assert facts is not None and facts.name == name and facts.config["num_hidden_layers"] >= 1


# -- max-model-len-within-model ----------------------------------------------------------------------------


def test_a_given_config_judges_an_unshipped_models_context(tmp_path: Path) -> None:
    folder = _model_folder(tmp_path / "private", PRIVATE_CONFIG)
    values = _values(model=PRIVATE, maxModelLen=8192)
    assert _run("max-model-len-within-model", values) == []
    [unknown] = _run("model-facts-source", values)
    assert unknown.severity == "warning" and "--model-config MODEL=PATH" in unknown.message
    [finding] = _run("max-model-len-within-model", values, {PRIVATE: folder})
    assert finding.severity == "error" and finding.path == "models[0].maxModelLen"
    assert f"limit of 4096 positions (config.json max_position_embeddings, from {folder})" in finding.message
    assert _run("model-facts-source", values, {PRIVATE: folder}) == []
    assert (
        _run("max-model-len-within-model", _values(model=PRIVATE, maxModelLen=4096), {PRIVATE: folder}) == []
    )


def test_a_cached_config_judges_the_context(_own_hub_cache: Path) -> None:
    _cache_snapshot(_own_hub_cache, PRIVATE, "d" * 40, PRIVATE_CONFIG)
    [finding] = _run("max-model-len-within-model", _values(model=PRIVATE, maxModelLen=8192))
    assert "limit of 4096 positions" in finding.message


def test_rope_scaling_that_vllm_multiplies_is_left_unjudged(tmp_path: Path) -> None:
    yarn = {**PRIVATE_CONFIG, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}
    llama3 = {**PRIVATE_CONFIG, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}
    values = _values(model=PRIVATE, maxModelLen=8192)
    assert _run("max-model-len-within-model", values, {PRIVATE: _model_folder(tmp_path / "y", yarn)}) == []
    assert _run("max-model-len-within-model", values, {PRIVATE: _model_folder(tmp_path / "l", llama3)}) != []


@pytest.mark.parametrize(
    ("repo", "limit"),
    [
        ("meta-llama/Llama-3.1-70B-Instruct", 131072),
        ("Qwen/Qwen2.5-7B-Instruct", 32768),
        ("Qwen/Qwen2.5-7B", 131072),
        ("Qwen/Qwen3-8B", 40960),
        ("google/gemma-2-2b-it", 8192),
        ("mistralai/Mistral-Nemo-Base-2407", 128000),
        ("meta-llama/Llama-2-7b-chat-hf", 4096),
        ("meta-llama/Llama-2-13b-hf", 4096),
    ],
)
def test_shipped_models_contexts(repo: str, limit: int) -> None:
    assert _run("max-model-len-within-model", _values(model=repo, maxModelLen=limit)) == []
    [finding] = _run("max-model-len-within-model", _values(model=repo, maxModelLen=limit + 1))
    assert f"limit of {limit} positions" in finding.message


# -- weights-fit-instance-gpus and gpu-memory-holds-weights ------------------------------------------------


def test_weights_beyond_every_gpu_of_the_instance_are_refused() -> None:
    values = _values(model="meta-llama/Llama-3.1-70B-Instruct", dtype="bfloat16")
    [finding] = _run("weights-fit-instance-gpus", values)
    assert finding.severity == "error" and finding.path == "models[0].instanceType"
    assert "1 x 44.99 GiB L40S = 45.0 GiB of GPU memory in all: no replica can load them" in finding.message
    # ... and gpu-memory-holds-weights leaves it to that rule rather than asking for more utilization
    assert _run("gpu-memory-holds-weights", values) == []


def test_weights_within_the_instances_gpus_are_left_to_the_utilization_rule() -> None:
    # 70B in bfloat16 (~131 GiB) on four L40S (180 GiB): fits the instance, not one GPU
    values = _values(
        model="meta-llama/Llama-3.3-70B-Instruct", dtype="bfloat16", instanceType="ml.g6e.12xlarge"
    )
    assert _run("weights-fit-instance-gpus", values) == []
    [finding] = _run("gpu-memory-holds-weights", values)
    assert finding.path == "models[0].gpuMemoryUtilization"
    spread = {**values["models"][0], "gpusPerReplica": 4}
    assert _run("gpu-memory-holds-weights", _values(**spread)) == []


def test_the_safetensors_total_size_counts_over_the_parameter_formula(tmp_path: Path) -> None:
    # the formula gives ~13 B parameters (26 GB in bf16); the index says 60 GB were stored
    heavy = _model_folder(tmp_path / "heavy", PRIVATE_CONFIG, total_size=60 * 10**9)
    light = _model_folder(tmp_path / "light", PRIVATE_CONFIG)
    values = _values(model=PRIVATE, dtype="bfloat16", maxModelLen=2048)
    assert _run("weights-fit-instance-gpus", values, {PRIVATE: light}) == []
    [finding] = _run("weights-fit-instance-gpus", values, {PRIVATE: heavy})
    assert f"has {60 * 10**9 / GIB:.1f} GiB of weights in bfloat16" in finding.message


def test_stored_float32_is_halved_for_a_bfloat16_run(tmp_path: Path) -> None:
    fp32 = _model_folder(
        tmp_path / "fp32", {**PRIVATE_CONFIG, "torch_dtype": "float32"}, total_size=96 * 10**9
    )
    values = _values(model=PRIVATE, dtype="bfloat16", maxModelLen=2048)
    # 96 GB stored in float32 is 48 GB (44.7 GiB) in bfloat16: under the L40S's 44.99 GiB
    assert _run("weights-fit-instance-gpus", values, {PRIVATE: fp32}) == []
    assert _run("weights-fit-instance-gpus", _values(model=PRIVATE, dtype="float32"), {PRIVATE: fp32}) != []


def test_a_quantized_checkpoint_without_an_index_is_not_judged(tmp_path: Path) -> None:
    awq = {**PRIVATE_CONFIG, "hidden_size": 16384, "quantization_config": {"quant_method": "awq"}}
    folder = _model_folder(tmp_path / "awq", awq)
    assert _run("weights-fit-instance-gpus", _values(model=PRIVATE), {PRIVATE: folder}) == []


# -- gated-model-needs-token -------------------------------------------------------------------------------


def _anonymous(**model: Any) -> dict[str, Any]:
    return _values(**model, source={"huggingface": {"tokenSecret": {"name": "", "key": "token"}}})


def test_a_gated_repository_without_a_token_is_refused() -> None:
    [finding] = _run("gated-model-needs-token", _anonymous(model="google/gemma-2-9b-it", dtype="bfloat16"))
    assert finding.severity == "error" and finding.path == "models[0].source.huggingface.tokenSecret"
    no_secret = _values(model="meta-llama/Llama-3.2-1B-Instruct", source={"huggingface": {}})
    assert [f.rule for f in _run("gated-model-needs-token", no_secret)] == ["gated-model-needs-token"]


def test_a_token_from_the_secret_or_the_environment_passes() -> None:
    assert _run("gated-model-needs-token", _values(model="meta-llama/Llama-3.2-1B-Instruct")) == []
    values = _anonymous(model="meta-llama/Llama-3.2-1B-Instruct")
    token = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}
    values["engine"] = {"extraEnv": [token]}
    assert _run("gated-model-needs-token", values) == []


def test_an_ungated_or_unknown_repository_needs_no_token(tmp_path: Path) -> None:
    assert _run("gated-model-needs-token", _anonymous(model="Qwen/Qwen3-8B")) == []
    assert _run("gated-model-needs-token", _anonymous(model=PRIVATE)) == []
    # a config.json says nothing of the Hub's gate: a given config does not make a model gated
    folder = _model_folder(tmp_path / "private", PRIVATE_CONFIG)
    assert _run("gated-model-needs-token", _anonymous(model=PRIVATE), {PRIVATE: folder}) == []


def test_a_model_from_a_claim_needs_no_token() -> None:
    values = _values(model="meta-llama/Llama-3.2-1B-Instruct", source={"pvc": {"claimName": "weights"}})
    assert _run("gated-model-needs-token", values) == []


# -- engine-cache-holds-weights ----------------------------------------------------------------------------


def _cache(size: str, **model: Any) -> dict[str, Any]:
    values = _values(**model)
    values["engine"] = {"cacheSize": size}
    return values


def test_a_cache_smaller_than_the_download_is_refused(tmp_path: Path) -> None:
    # the index's total_size counts, whatever dtype vLLM runs in
    folder = _model_folder(tmp_path / "private", PRIVATE_CONFIG, total_size=30 * 2**30)
    assert _run("engine-cache-holds-weights", _cache("31Gi", model=PRIVATE), {PRIVATE: folder}) == []
    [finding] = _run("engine-cache-holds-weights", _cache("29Gi", model=PRIVATE), {PRIVATE: folder})
    assert finding.severity == "error" and finding.path == "engine.cacheSize"
    assert "downloads 30.0 GiB of weights into it" in finding.message


def test_the_stored_dtype_sizes_the_download() -> None:
    # Gemma 2 9B's base checkpoint is stored in float32 (config.json torch_dtype): ~34 GiB to download
    [finding] = _run(
        "engine-cache-holds-weights", _cache("30Gi", model="google/gemma-2-9b", dtype="bfloat16")
    )
    assert "downloads 34.4 GiB" in finding.message


def test_no_download_no_cache_check() -> None:
    from_claim = _cache("1Gi", source={"pvc": {"claimName": "weights"}})
    assert _run("engine-cache-holds-weights", from_claim) == []
    hyperpod = _cache("1Gi")
    hyperpod["target"] = "hyperpod"
    assert _run("engine-cache-holds-weights", hyperpod) == []
    assert _run("engine-cache-holds-weights", _cache("1Gi", model=PRIVATE)) == []  # unknown model


# -- l2-storageclass-gives-rwx -----------------------------------------------------------------------------


def _external_class(name: str, curvine: bool = False) -> dict[str, Any]:
    values = copy.deepcopy(GOOD)
    values["curvine"]["enabled"] = curvine
    values["cache"]["l2"]["claim"]["storageClassName"] = name
    return values


def _on_cluster(
    rule_id: str, values: dict[str, Any], classes: dict[str, str], release_cluster: bool = False
) -> list[Finding]:
    """The rule with a cluster that serves `classes` (name -> provisioner) and no other: the release's
    cluster, or a control plane of validate's own."""
    loaded = loader.load_text(yaml.safe_dump(values, sort_keys=False), Path("env.yaml"))

    def read(name: str) -> storage_classes.ClusterClass:
        if name in classes:
            return storage_classes.ClusterClass(name, "context test", classes[name])
        problem = f"no StorageClass {name!r} there"
        return storage_classes.ClusterClass(name, "context test", problem=problem, absent=release_cluster)

    ctx = ValuesContext(loaded.data, loaded, storage_classes=read)
    return catalogue.run_values(ctx, only=[rule_id])


@pytest.mark.parametrize(
    ("name", "provisioner"),
    [("gp2", "kubernetes.io/aws-ebs"), ("gp3", "ebs.csi.aws.com"), ("ebs-sc", "ebs.csi.aws.com")],
)
def test_a_block_class_name_alone_is_a_warning_that_says_how_to_confirm(name: str, provisioner: str) -> None:
    [finding] = _run("l2-storageclass-gives-rwx", _external_class(name))
    assert finding.severity == "warning" and finding.path == "cache.l2.claim.storageClassName"
    assert f"a class of {provisioner}" in finding.message and "only ReadWriteOnce" in finding.message
    assert f"kubectl get storageclass {name} -o jsonpath='{{.provisioner}}'" in finding.message
    assert "--server --context" in finding.message and "offline" in finding.message


@pytest.mark.parametrize("name", ["efs-sc", "fsx-sc"])
def test_a_file_system_class_gives_it(name: str) -> None:
    assert _run("l2-storageclass-gives-rwx", _external_class(name)) == []


def test_an_unknown_class_is_a_warning_that_says_what_to_check() -> None:
    [finding] = _run("l2-storageclass-gives-rwx", _external_class("nfs-client"))
    assert finding.severity == "warning" and "kubectl get storageclass nfs-client" in finding.message


def test_the_clusters_class_decides_not_its_name() -> None:
    rule_id = "l2-storageclass-gives-rwx"
    assert _on_cluster(rule_id, _external_class("gp2"), {"gp2": "efs.csi.aws.com"}) == []
    [refused] = _on_cluster(rule_id, _external_class("fast"), {"fast": "ebs.csi.aws.com"})
    assert refused.severity == "error" and refused.path == "cache.l2.claim.storageClassName"
    assert "'fast' is, on context test, a StorageClass of ebs.csi.aws.com" in refused.message
    assert "only ReadWriteOnce, ReadWriteOncePod" in refused.message
    [unknown] = _on_cluster(rule_id, _external_class("shared"), {"shared": "example.com/nfs"})
    assert unknown.severity == "warning" and "example.com/nfs, a provisioner validate does not know" in (
        unknown.message
    )
    assert _on_cluster(rule_id, _external_class("other-curvine"), {"other-curvine": "curvine"}) == []


def test_a_class_the_cluster_lacks_falls_back_to_its_name_and_says_why() -> None:
    [finding] = _on_cluster("l2-storageclass-gives-rwx", _external_class("gp3"), {})
    assert finding.severity == "warning" and "no StorageClass 'gp3' there" in finding.message
    assert "a class of ebs.csi.aws.com" in finding.message


def test_a_class_missing_on_the_releases_cluster_is_a_warning_whatever_its_name() -> None:
    [finding] = _on_cluster("l2-storageclass-gives-rwx", _external_class("efs-sc"), {}, release_cluster=True)
    assert finding.severity == "warning" and finding.path == "cache.l2.claim.storageClassName"
    assert "no StorageClass of that name on context test, so the L2 claim stays Pending" in finding.message


def test_with_the_releases_curvine_the_class_is_another_rules() -> None:
    assert _run("l2-storageclass-gives-rwx", _external_class("gp3", curvine=True)) == []
    assert _run("l2-claim-on-curvine", _external_class("gp3", curvine=True)) != []


def test_the_provisioner_facts() -> None:
    assert storage_provisioners.gives_rwx("ebs.csi.aws.com") is False
    assert storage_provisioners.gives_rwx("kubernetes.io/aws-ebs") is False
    assert storage_provisioners.gives_rwx("efs.csi.aws.com") is True
    assert storage_provisioners.gives_rwx("curvine") is True
    assert storage_provisioners.gives_rwx("example.com/unknown") is None


# -- curvine-data-dirs-fit-instance-store ------------------------------------------------------------------


def _worker(instance: str, *dirs: dict[str, Any], reserved: str | None = None) -> dict[str, Any]:
    values = copy.deepcopy(GOOD)
    worker = values["curvine"]["worker"]
    worker["nodeSelector"] = {"node.kubernetes.io/instance-type": instance}
    worker["dataDirs"] = list(dirs)
    if reserved:
        worker["dirReserved"] = reserved
    return values


NVME = "/opt/dlami/nvme/curvine-data"


def test_every_instance_store_figure_is_an_instance_type_we_know() -> None:
    assert set(INSTANCE_STORE_GB) <= set(INSTANCE_TYPES)


def test_capacities_beyond_the_instance_store_are_refused() -> None:
    # 600 GB = 558.8 GiB; Curvine's 560GB is 560 GiB
    assert (
        _run(
            "curvine-data-dirs-fit-instance-store",
            _worker("ml.g6e.4xlarge", {"path": NVME, "type": "SSD", "capacity": "550GB"}),
        )
        == []
    )
    [finding] = _run(
        "curvine-data-dirs-fit-instance-store",
        _worker("ml.g6e.4xlarge", {"path": NVME, "type": "SSD", "capacity": "560GB"}),
    )
    assert finding.severity == "error" and finding.path == "curvine.worker.dataDirs[0].capacity"
    assert "more than ml.g6e.4xlarge's 600 GB instance store (558.8 GiB)" in finding.message


def test_dir_reserved_counts_per_dir() -> None:
    dirs = (
        {"path": NVME, "type": "SSD", "capacity": "270GB"},
        {"path": NVME + "2", "type": "SSD", "capacity": "270GB"},
    )
    assert _run("curvine-data-dirs-fit-instance-store", _worker("g6e.4xlarge", *dirs, reserved="5GB")) == []
    [finding] = _run("curvine-data-dirs-fit-instance-store", _worker("g6e.4xlarge", *dirs, reserved="10GB"))
    assert finding.path == "curvine.worker.dataDirs[1].capacity"


def test_an_instance_without_a_store_is_refused() -> None:
    [finding] = _run(
        "curvine-data-dirs-fit-instance-store",
        _worker("ml.p3.2xlarge", {"path": NVME, "type": "SSD", "capacity": "1GB"}),
    )
    assert "has no instance store (EBS only)" in finding.message


def test_what_is_not_on_the_instance_store_is_not_judged() -> None:
    memory = {"path": "/dev/shm/curvine", "type": "MEM", "capacity": "900GB"}
    root = {"path": "/var/lib/curvine", "type": "SSD", "capacity": "900GB"}
    assert _run("curvine-data-dirs-fit-instance-store", _worker("ml.g6e.4xlarge", memory, root)) == []


def test_an_instance_type_without_a_store_figure_is_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    unknown = dataclasses.replace(facts.instance_types()["ml.g6.xlarge"], instance_store_gb=None)
    monkeypatch.setitem(facts.instance_types(), "ml.g6.xlarge", unknown)  # every shipped type has a figure
    [finding] = _run(
        "curvine-data-dirs-fit-instance-store",
        _worker("ml.g6.xlarge", {"path": NVME, "type": "SSD", "capacity": "1GB"}),
    )
    assert finding.severity == "warning" and "instance store size validate does not know" in finding.message


# -- the command -------------------------------------------------------------------------------------------


def test_validate_takes_model_configs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = tmp_path / "env.yaml"
    env.write_text(yaml.safe_dump({"models": [{**GOOD["models"][0], "model": PRIVATE, "maxModelLen": 8192}]}))
    base = [
        "validate",
        "--no-render",
        "--offline",
        "-o",
        "json",
        "-f",
        str(paths.VALUES / "staging.yaml"),
        "-f",
        str(env),
    ]

    def rules(code_wanted: int, *extra: str) -> set[tuple[str, str]]:
        code = cli.main([*base, *extra])
        out = json.loads(capsys.readouterr().out)
        assert code == code_wanted, out
        return {(f["rule"], f["severity"]) for f in out["environments"][0]["findings"]}

    assert ("model-facts-source", "warning") in rules(0)
    folder = _model_folder(tmp_path / "private", PRIVATE_CONFIG)
    found = rules(1, "--model-config", f"{PRIVATE}={folder}")
    assert ("max-model-len-within-model", "error") in found and (
        "model-facts-source",
        "warning",
    ) not in found
    assert cli.main([*base, "--model-config", str(tmp_path / "nowhere.json")]) == exitcodes.USAGE
    assert "--model-config" in capsys.readouterr().err
