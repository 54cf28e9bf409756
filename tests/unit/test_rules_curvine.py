"""The Curvine rules (curvine_rules.py) and the eviction watermarks (eviction_rules.py), read as their
consumers read them: the eviction script's own parser, Curvine's size units, the memory cgroup, the
scheduler's toleration matching and the chart's StorageClass choice."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvtier.validate import catalogue
from kvtier.validate.findings import Finding
from kvtier.validate.inputs import loader
from kvtier.validate.rules import ValuesContext

FIXTURES = Path(__file__).parents[1] / "fixtures" / "values"
GOOD = loader.load(FIXTURES / "good-minimal.yaml").data
GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def run(rule_id: str, values: dict[str, Any]) -> list[Finding]:
    loaded = loader.load_text(yaml.safe_dump(values), Path("env.yaml"))
    return catalogue.run_values(ValuesContext(values, loaded), only=[rule_id])


def good() -> dict[str, Any]:
    return copy.deepcopy(GOOD)


# --- eviction-watermarks ------------------------------------------------------------------------------


def evict(high: str, low: str = "1Gi", **more: Any) -> list[Finding]:
    values = good()
    values["cache"]["l2"]["eviction"] = {"highWatermark": high, "lowWatermark": low, **more}
    values["metrics"] = {"dashboard": {"kvBytesPerToken": 57344}}  # one chunk: 256 x 57344 = 14 MiB
    return run("eviction-watermarks", values)


def test_alluxio_ratios_are_bytes_to_the_script_and_refused_with_the_percentage_meant() -> None:
    findings = evict("0.9", "0.75")
    assert [(f.path, f.severity) for f in findings] == [
        ("cache.l2.eviction.highWatermark", "error"),
        ("cache.l2.eviction.lowWatermark", "error"),
    ]
    assert "read by l2_evict.py as 0 bytes" in findings[0].message
    assert 'write "90%"' in findings[0].message and 'write "75%"' in findings[1].message


def test_a_watermark_below_one_chunk_file_is_refused_and_one_chunk_is_accepted() -> None:
    assert evict("14Mi", "14Mi") == []  # exactly one chunk file (14680064 B)
    [finding] = evict("100Gi", "14680063")
    assert finding.path == "cache.l2.eviction.lowWatermark"
    assert "less than one chunk file (14,680,064 B)" in finding.message
    assert "a bare number is bytes" in finding.message
    # A percentage that comes to less than a chunk of the 500Gi capacity.
    [tiny] = evict("0.001%", "0.001%")[:1]
    assert tiny.path == "cache.l2.eviction.highWatermark" and "5,368,709 bytes" in tiny.message


def test_without_the_kv_size_only_zero_bytes_is_known_to_be_below_a_chunk() -> None:
    values = good()
    values["cache"]["l2"]["eviction"] = {"highWatermark": "1", "lowWatermark": "0"}
    [finding] = run("eviction-watermarks", values)
    assert finding.path == "cache.l2.eviction.lowWatermark" and "less than one byte" in finding.message


def test_high_watermark_at_or_above_the_claim_is_a_warning_and_above_a_declared_capacity_an_error() -> None:
    """Curvine does not hold a claim to claim.size, so the usage can pass it on a larger pool: a warning.
    eviction.capacity is the size the user declares for the volume: a high watermark above it is an error."""
    above = evict("600Gi", "400Gi")
    assert [f.severity for f in above] == ["warning"]
    assert "at or above the capacity 500Gi (cache.l2.claim.size)" in above[0].message
    assert [f.severity for f in evict("500Gi", "400Gi")] == ["warning"]
    assert [f.severity for f in evict("100%", "70%")] == ["warning"]
    assert evict("499Gi", "400Gi") == []
    assert evict("85%", "70%") == []
    values = good()
    declared_size = {"highWatermark": "600Gi", "lowWatermark": "400Gi", "capacity": "550Gi"}
    values["cache"]["l2"]["eviction"] = declared_size
    [declared] = run("eviction-watermarks", values)
    assert declared.severity == "error" and "(cache.l2.eviction.capacity)" in declared.message


def test_an_existing_claim_of_unknown_size_makes_it_a_warning_unless_the_capacity_is_given() -> None:
    values = good()
    values["cache"]["l2"]["claim"]["existingClaim"] = "shared-l2"
    values["cache"]["l2"]["eviction"] = {"highWatermark": "600Gi", "lowWatermark": "400Gi"}
    [finding] = run("eviction-watermarks", values)
    assert finding.severity == "warning" and "may not be the size" in finding.message
    values["cache"]["l2"]["eviction"]["capacity"] = "550Gi"
    [finding] = run("eviction-watermarks", values)
    assert finding.severity == "error" and "(cache.l2.eviction.capacity)" in finding.message


def test_low_above_high_is_still_refused() -> None:
    [finding] = evict("70%", "85%")
    assert finding.path == "cache.l2.eviction.lowWatermark" and "is above highWatermark" in finding.message


# --- curvine-mem-tier-within-limit ---------------------------------------------------------------------


def mem(
    capacity: str | None, limit: str | None = "8Gi", request: str = "2Gi", **worker: Any
) -> list[Finding]:
    values = good()
    tier: dict[str, Any] = {"path": "/dev/shm/curvine", "type": "MEM"}
    if capacity is not None:
        tier["capacity"] = capacity
    w = values["curvine"]["worker"]
    w["dataDirs"] = [tier, *w["dataDirs"]]
    w["resources"] = {"requests": {"memory": request}}
    if limit is not None:
        w["resources"]["limits"] = {"memory": limit}
    w.update(worker)
    return run("curvine-mem-tier-within-limit", values)


def test_a_mem_tier_above_the_worker_memory_limit_is_refused() -> None:
    [finding] = mem("32GB")
    assert finding.severity == "error" and finding.path == "curvine.worker.dataDirs[0].capacity"
    assert "32.0 GiB" in finding.message and "limits.memory caps at 8Gi" in finding.message


def test_curvine_units_are_binary_so_8gb_fills_an_8gi_limit() -> None:
    [finding] = mem("8GB")  # ByteUnit: 8GB = 8 GiB, nothing left for the worker
    assert finding.severity == "error"
    assert mem("8g", dirReserved="1GB")[0].severity == "warning"  # 7 GiB: 1 GiB left, under the 2Gi request
    assert mem("6GB") == []  # 2 GiB left: the request exactly


def test_mem_tiers_add_up() -> None:
    values = good()
    values["curvine"]["worker"]["dataDirs"] += [
        {"path": "/dev/shm/a", "type": "MEM", "capacity": "3GB"},
        {"path": "/dev/shm/b", "type": "mem", "capacity": "5GB"},  # Curvine reads the type in any case
    ]
    values["curvine"]["worker"]["resources"] = {"limits": {"memory": "8Gi"}}
    [finding] = run("curvine-mem-tier-within-limit", values)
    assert finding.path == "curvine.worker.dataDirs[1].capacity" and "8.0 GiB" in finding.message


def test_a_mem_tier_without_capacity_is_the_whole_tmpfs() -> None:
    [finding] = mem(None)
    assert finding.severity == "error" and finding.path == "curvine.worker.dataDirs[0]"
    assert "without a capacity" in finding.message
    assert mem(None, limit=None) == []  # no cgroup limit to hit


def test_only_mem_tiers_and_an_enabled_curvine_count() -> None:
    values = good()
    values["curvine"]["worker"]["resources"] = {"limits": {"memory": "1Gi"}}
    assert run("curvine-mem-tier-within-limit", values) == []  # a 500GB SSD dir is not memory
    values = good()
    values["curvine"]["enabled"] = False
    values["curvine"]["worker"]["dataDirs"] = [{"path": "/dev/shm/c", "type": "MEM", "capacity": "32GB"}]
    values["curvine"]["worker"]["resources"] = {"limits": {"memory": "8Gi"}}
    assert run("curvine-mem-tier-within-limit", values) == []


# --- curvine-daemons-tolerate-engine-taints ------------------------------------------------------------


def taints(engine: list[Any], worker: list[Any], csi: list[Any] | None = None, **more: Any) -> list[Finding]:
    values = good()
    values["engine"] = {"tolerations": engine}
    values["curvine"]["worker"]["tolerations"] = worker
    values["curvine"]["worker"]["hostNetwork"] = False  # the DaemonSet controller's tolerations without it
    if csi is not None:
        values["curvine"]["csi"] = {"node": {"tolerations": csi}}
    for key, value in more.items():
        values[key] = value
    return run("curvine-daemons-tolerate-engine-taints", values)


def test_replaced_worker_tolerations_lose_the_engines_gpu_taint() -> None:
    [finding] = taints(
        [GPU], [{"key": "dedicated", "operator": "Equal", "value": "kv", "effect": "NoSchedule"}]
    )
    assert finding.path == "curvine.worker.tolerations" and finding.severity == "error"
    assert "engine.tolerations[0]" in finding.message and "nvidia.com/gpu:NoSchedule" in finding.message
    assert taints([GPU], [GPU]) == []


def test_toleration_matching_follows_the_scheduler() -> None:
    equal = {"key": "k", "operator": "Equal", "value": "v1", "effect": "NoSchedule"}
    assert taints([equal], [{"operator": "Exists"}]) == []  # empty key + Exists tolerates everything
    assert taints([equal], [{"key": "k", "operator": "Exists"}]) == []  # empty effect: every effect
    assert taints([equal], [{"key": "k", "value": "v1", "effect": "NoSchedule"}]) == []  # "" operator: Equal
    assert len(taints([equal], [{**equal, "value": "v2"}])) == 1
    assert len(taints([equal], [{**equal, "effect": "NoExecute"}])) == 1
    # Exists in the engines: any value, so only Exists covers it.
    exists = {"key": "k", "operator": "Exists", "effect": "NoSchedule"}
    assert len(taints([exists], [equal])) == 1
    # Tolerating everything needs the same of the workers.
    [everything] = taints([{"operator": "Exists", "effect": "NoSchedule"}], [exists])
    assert "every taint (NoSchedule)" in everything.message


def test_an_engine_toleration_without_effect_covers_both_blocking_effects() -> None:
    [finding] = taints(
        [{"key": "k", "operator": "Exists"}], [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]
    )
    assert "k:NoExecute" in finding.message
    assert taints([{"key": "k", "operator": "Exists", "effect": "PreferNoSchedule"}], []) == []


def test_daemonset_pods_get_the_node_condition_tolerations() -> None:
    unschedulable = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
    assert taints([unschedulable], []) == []
    network = {"key": "node.kubernetes.io/network-unavailable", "operator": "Exists", "effect": "NoSchedule"}
    assert len(taints([network], [])) == 1
    values = good()
    values["engine"] = {"tolerations": [network]}
    values["curvine"]["worker"]["hostNetwork"] = True
    assert run("curvine-daemons-tolerate-engine-taints", values) == []


def test_a_noexecute_toleration_with_seconds_evicts_the_worker() -> None:
    engine = {"key": "k", "operator": "Exists", "effect": "NoExecute"}
    worker = {**engine, "tolerationSeconds": 300}
    assert len(taints([engine], [worker])) == 1
    assert taints([{**engine, "tolerationSeconds": 60}], [worker]) == []


def test_the_csi_node_plugin_must_tolerate_the_engines_and_models_taints() -> None:
    findings = taints([GPU], [GPU], csi=[])  # the engines' and the model's own GPU toleration
    assert [f.path for f in findings] == ["curvine.csi.node.tolerations"] * 2
    assert "engine.tolerations[0]" in findings[0].message and "cannot be mounted there" in findings[0].message
    assert taints([GPU], [GPU], csi=[{"operator": "Exists"}]) == []
    values = good()  # the model tolerates the GPU taint (its workers too): the node plugin must as well
    values["curvine"]["csi"] = {"node": {"tolerations": []}}
    [finding] = run("curvine-daemons-tolerate-engine-taints", values)
    assert "models[0].tolerations[0]" in finding.message
    values["curvine"]["csi"]["enabled"] = False
    assert run("curvine-daemons-tolerate-engine-taints", values) == []


def test_only_the_standalone_engines_and_an_enabled_curvine_are_judged() -> None:
    assert taints([GPU], [], target="hyperpod") == []
    values = good()
    values["engine"] = {"tolerations": [GPU]}
    values["curvine"]["worker"]["tolerations"] = []
    values["curvine"]["enabled"] = False
    assert run("curvine-daemons-tolerate-engine-taints", values) == []


# --- l2-claim-on-curvine -------------------------------------------------------------------------------


def storage(name: str, **curvine: Any) -> list[Finding]:
    values = good()
    values["cache"]["l2"]["claim"]["storageClassName"] = name
    values["curvine"].update(curvine)
    return run("l2-claim-on-curvine", values)


def test_a_block_class_with_curvine_enabled_is_refused() -> None:
    [finding] = storage("gp3")
    assert finding.path == "cache.l2.claim.storageClassName" and finding.severity == "error"
    assert "'gp3', not this release's Curvine StorageClass '<release>-curvine'" in finding.message
    assert "curvine.enabled=false" in finding.message


@pytest.mark.parametrize("name", ["", "kv-curvine", "my-release.v2-curvine"])
def test_curvines_own_class_passes(name: str) -> None:
    assert storage(name) == []


def test_a_named_curvine_class_must_be_that_name() -> None:
    assert storage("fast-l2", storageClass={"name": "fast-l2"}) == []
    [finding] = storage("kv-curvine", storageClass={"name": "fast-l2"})
    assert "'fast-l2' (curvine.storageClass.name)" in finding.message


def test_no_finding_where_the_class_is_elsewhere_by_design() -> None:
    assert storage("gp3", enabled=False) == []
    assert storage("efs-sc", storageClass={"enabled": False}) == []
    values = good()
    values["cache"]["l2"]["claim"].update(storageClassName="gp3", existingClaim="shared")
    assert run("l2-claim-on-curvine", values) == []
