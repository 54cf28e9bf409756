"""The chart's Curvine read settings (config.read, config.fuse): rendered into [client] and [fuse] under the
keys Curvine v0.4.1 reads, typed by the schema, and a chunk size x prefetch depth above the worker's 16 MiB
cap (curvine-worker read_handler.rs MAX_READ_AHEAD) refused at render time."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest
from render import find, helm_bin, render

from kvtier.upstream import curvine_config

CAP = 16 * 1024 * 1024  # curvine-worker/src/worker/handler/read_handler.rs MAX_READ_AHEAD (v0.4.1)


def toml(need, values: dict[str, Any]) -> dict[str, Any]:
    need(helm_bin(3).exists(), "pinned Helm 3 not built (make tools)")
    result = render("curvine", set_values=values)
    assert result.returncode == 0, result.stderr
    import yaml

    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    [cm] = [d for d in find(docs, "ConfigMap") if "curvine-cluster.toml" in d["data"]]
    return tomllib.loads(cm["data"]["curvine-cluster.toml"])


def test_read_and_fuse_settings_reach_curvine_keys(need) -> None:
    config = toml(
        need,
        {
            "config.read.chunkSize": "2MB",
            "config.read.chunkNum": 4,
            "config.read.parallel": 2,
            "config.read.sliceSize": "8MB",
            "config.fuse.entryTimeoutMs": 5000,
            "config.fuse.attrTimeoutMs": 6000,
            "config.fuse.negativeTimeoutMs": 7,
            "config.fuse.enableMetaCache": True,
            "config.fuse.metaCacheTimeout": "30s",
            "config.fuse.maxReadaheadKb": 4096,
        },
    )
    client, fuse = config["client"], config["fuse"]
    assert (client["read_chunk_size"], client["read_chunk_num"], client["read_parallel"]) == ("2MB", 4, 2)
    assert client["read_slice_size"] == "8MB"
    assert curvine_config.size_bytes(client["read_chunk_size"]) == 2 << 20
    assert (fuse["entry_timeout_ms"], fuse["attr_timeout_ms"], fuse["negative_timeout_ms"]) == (5000, 6000, 7)
    assert (fuse["enable_meta_cache"], fuse["meta_cache_timeout"], fuse["max_readahead_kb"]) == (
        True,
        "30s",
        4096,
    )
    # Curvine ignores unknown keys silently: every rendered key must be one v0.4.1 reads.
    assert curvine_config.check(config) == []


@pytest.mark.parametrize("size", ["128KB", "512k", "1MB", "2m", "4MB", "8MB"])
def test_the_prefetch_cap_is_the_workers_16_mib(size: str, need) -> None:
    """The largest chunkNum under the cap renders, one more is refused: the template's size parsing agrees
    with Curvine's ByteUnit (curvine_config.size_bytes) on every unit spelling."""
    chunk = curvine_config.size_bytes(size)
    assert chunk
    most = CAP // chunk
    config = toml(need, {"config.read.chunkSize": size, "config.read.chunkNum": most})
    assert config["client"]["read_chunk_num"] == most
    result = render("curvine", set_values={"config.read.chunkSize": size, "config.read.chunkNum": most + 1})
    assert result.returncode != 0
    assert "[curvine-read-chunk-cap] config.read: chunkSize" in result.stderr
    assert f"Lower chunkNum to {most} or less" in result.stderr


def test_one_chunk_without_prefetch_may_be_the_cap_but_not_above(need) -> None:
    assert (
        toml(need, {"config.read.chunkSize": "16MB", "config.read.chunkNum": 1})["client"]["read_chunk_num"]
        == 1
    )
    result = render("curvine", set_values={"config.read.chunkSize": "17MB", "config.read.chunkNum": 1})
    assert result.returncode != 0
    assert "[curvine-read-chunk-cap] config.read.chunkSize: 17MB" in result.stderr


@pytest.mark.parametrize(
    "key, value",
    [
        ("config.read.chunkNum", 0),
        ("config.read.parallel", 9),
        ("config.read.chunkSize", "1 GiB"),
        ("config.read.chunkSize", "0"),
        ("config.fuse.maxReadaheadKb", 0),
        ("config.fuse.metaCacheTimeout", "1 minute"),
    ],
)
def test_the_schema_refuses_what_curvine_refuses(key: str, value: Any, need) -> None:
    need(helm_bin(3).exists(), "pinned Helm 3 not built (make tools)")
    result = render("curvine", set_values={key: value})
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr


def test_defaults_render_within_the_cap(need) -> None:
    client = toml(need, {})["client"]
    chunk = curvine_config.size_bytes(client["read_chunk_size"])
    assert chunk and (client["read_chunk_num"] <= 1 or chunk * client["read_chunk_num"] <= CAP)
