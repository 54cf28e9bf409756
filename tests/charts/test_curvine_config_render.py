"""The curvine-cluster.toml the chart renders: parses (tomllib), only Curvine v0.4.1 keys, typed data
dirs, every master's own hostname in journal_addrs, explicit web ports, and pods roll on change."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from curvine_scenarios import names, values_files
from render import NAMESPACE, find, helm_bin, render_docs

from kvtier.plan import readspeed
from kvtier.upstream import curvine_config


def rendered(need, **kwargs: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    need(helm_bin(3).exists(), "pinned Helm 3 not built (make tools)")
    docs = render_docs("curvine", **kwargs)
    [cm] = [d for d in find(docs, "ConfigMap") if "curvine-cluster.toml" in d["data"]]
    return docs, tomllib.loads(cm["data"]["curvine-cluster.toml"])


def master_hostnames(docs: list[dict[str, Any]]) -> list[str]:
    """The CURVINE_MASTER_HOSTNAME each master pod gets, with $(POD_NAME) expanded per ordinal."""
    [sts] = find(docs, "StatefulSet")
    env = {e["name"]: e.get("value") for e in sts["spec"]["template"]["spec"]["containers"][0]["env"]}
    pods = [f"{sts['metadata']['name']}-{i}" for i in range(sts["spec"]["replicas"])]
    return [env["CURVINE_MASTER_HOSTNAME"].replace("$(POD_NAME)", pod) for pod in pods]


@pytest.mark.parametrize("scenario", names())
def test_rendered_toml_is_valid_for_curvine(scenario: str, tmp_path: Path, need) -> None:
    docs, config = rendered(need, values=values_files(scenario, tmp_path))
    assert curvine_config.check(config) == []
    peers = [p["hostname"] for p in config["journal"]["journal_addrs"]]
    assert master_hostnames(docs) == peers
    assert all(h.endswith(f".{NAMESPACE}.svc.{h.split('.svc.')[1]}") for h in peers)
    assert [a["hostname"] for a in config["client"]["master_addrs"]] == peers
    tiers = [entry.split("]")[0].strip("[").split(":")[0] for entry in config["worker"]["data_dir"]]
    assert tiers and set(tiers) <= curvine_config.TIER_TYPES
    for section in ("master", "worker", "fuse"):
        assert isinstance(config[section]["web_port"], int), f"{section}.web_port must be explicit"


def test_non_default_ports_and_names_reach_the_config(need) -> None:
    docs, config = rendered(need, values=[Path("charts/curvine/ci/custom-values.yaml").resolve()])
    assert (config["master"]["rpc_port"], config["master"]["web_port"]) == (18995, 19000)
    assert config["journal"]["rpc_port"] == 18996
    assert {p["port"] for p in config["journal"]["journal_addrs"]} == {18996}
    assert {a["port"] for a in config["client"]["master_addrs"]} == {18995}
    assert (config["worker"]["rpc_port"], config["worker"]["web_port"], config["fuse"]["web_port"]) == (
        18997,
        19001,
        19002,
    )
    assert config["cluster_id"] == "kvpool"
    assert config["worker"]["data_dir"] == ["[SSD:800GB]/mnt/nvme0/curvine", "[SSD:1536GB]/mnt/nvme1/curvine"]
    assert len(master_hostnames(docs)) == 5
    assert all(h.endswith(".l2pool-master.kv.svc.corp.example") for h in master_hostnames(docs))


def test_the_checker_catches_an_unknown_key_in_the_rendered_file(need) -> None:
    _, config = rendered(need)
    config["worker"]["dataDir"] = config["worker"].pop("data_dir")
    assert [f.key for f in curvine_config.check(config) if f.rule == "unknown-key"] == ["worker.dataDir"]


@pytest.mark.parametrize("replicas", [2, 4])
def test_even_master_count_is_refused_with_the_reason(replicas: int, need) -> None:
    need(helm_bin(3).exists(), "pinned Helm 3 not built (make tools)")
    from render import render

    result = render("curvine", set_values={"master.replicas": replicas})
    assert result.returncode != 0
    assert f"[curvine-masters-odd] master.replicas: {replicas}:" in result.stderr
    assert "odd count" in result.stderr


def test_config_change_rolls_masters_and_workers(need) -> None:
    def checksums(docs: list[dict[str, Any]]) -> dict[str, str]:
        kinds = find(docs, "StatefulSet") + find(docs, "DaemonSet")
        return {
            d["metadata"]["name"]: d["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
            for d in kinds
            if "checksum/config" in d["spec"]["template"]["metadata"].get("annotations", {})
        }

    before, _ = rendered(need)
    after, _ = rendered(need, set_values={"config.blockSize": "128MB"})
    old, new = checksums(before), checksums(after)
    assert set(old) == {"rel-curvine-master", "rel-curvine-worker"}
    assert all(old[name] != new[name] for name in old)


def test_the_read_settings_plan_assumes_for_unset_values_are_the_ones_the_chart_renders(need) -> None:
    """kvtier plan and l2-read-slower-than-recompute pick the measured entry by these (plan.readspeed)."""
    _, config = rendered(need)
    assert readspeed.chart_defaults() == {key: str(config["client"][key]) for key in readspeed.VALUES_KEYS}


@pytest.mark.parametrize("odd", ["\u0085", "\u2028", "\u2029"])
def test_a_data_dir_path_reaches_the_mounts_and_the_config_as_written(need, tmp_path: Path, odd: str) -> None:
    """The schema allows a path with a character YAML reads as a line break (Go's \\s is ASCII only): it
    must stay one string in every DaemonSet that mounts it and in curvine-cluster.toml."""
    path = f"/mnt/nvme{odd}0"
    values = tmp_path / "values.yaml"
    values.write_text(json.dumps({"worker": {"dataDirs": [{"path": path, "type": "SSD"}]}}))
    docs, config = rendered(need, values=[values])
    assert config["worker"]["data_dir"] == [f"[SSD]{path}"]
    daemonsets = find(docs, "DaemonSet")
    assert len(daemonsets) == 2  # the workers and the CSI node plugins
    for daemonset in daemonsets:
        spec = daemonset["spec"]["template"]["spec"]
        host_paths = [v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v]
        mounts = [m["mountPath"] for c in spec["containers"] for m in c.get("volumeMounts", [])]
        assert path in host_paths and path in mounts, daemonset["metadata"]["name"]
