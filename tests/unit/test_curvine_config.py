"""kvtier.upstream.curvine_config: the known key set of Curvine v0.4.1 and the checks of a rendered TOML."""

from __future__ import annotations

import pytest

from kvtier.errors import UserError
from kvtier.upstream import curvine_config as cc

GOOD = """
cluster_id = "curvine"
format_master = false
format_worker = false
[master]
hostname = "m-0.m.ns.svc.cluster.local"
rpc_port = 8995
web_port = 9000
meta_dir = "/data/curvine/meta"
[master.log]
level = "INFO"
[journal]
rpc_port = 8996
journal_dir = "/data/curvine/journal"
journal_addrs = [{ id = 1, hostname = "m-0.m.ns.svc.cluster.local", port = 8996 }]
[worker]
dir_reserved = "10GB"
data_dir = ["[SSD:500GB]/opt/dlami/nvme/curvine-data", "[ssd]/mnt/b", "[MEM:2GB]/dev/shm/c"]
[client]
master_addrs = [{ hostname = "m-0.m.ns.svc.cluster.local", port = 8995 }]
block_size = "64MB"
short_circuit = true
[fuse]
web_port = 9002
"""


def rules(text: str) -> list[tuple[str, str]]:
    return [(f.rule, f.key) for f in cc.check_text(text)]


def test_a_valid_config_has_no_findings() -> None:
    assert rules(GOOD) == []


def test_every_rule_has_reason_and_remedy() -> None:
    for rule in cc.RULES.values():
        assert rule.reason and rule.remedy


@pytest.mark.parametrize(
    ("old", "new", "where"),
    [
        ("web_port = 9000", "webport = 9000", "master.webport"),
        ('block_size = "64MB"', 'blocksize = "64MB"', "client.blocksize"),
        ("[fuse]", "[fuse2]", "fuse2"),
        ("port = 8995 }", "port = 8995, weight = 1 }", "client.master_addrs.weight"),
        ("id = 1,", 'id = 1, ip = "x",', "journal.journal_addrs.ip"),
        ('level = "INFO"', 'lvl = "INFO"', "master.log.lvl"),
    ],
)
def test_unknown_keys_are_found_at_any_depth(old: str, new: str, where: str) -> None:
    assert ("unknown-key", where) in rules(GOOD.replace(old, new, 1))


def test_unknown_key_suggests_the_closest_known_key() -> None:
    [finding] = cc.check_text(GOOD.replace("web_port = 9000", "web_prot = 9000"))
    assert "did you mean 'web_port'" in finding.message


def test_serde_aliases_and_skipped_fields() -> None:
    # `block_size` is an alias of block_size_str; journal's metadata_delta_log_capacity is skipped by serde.
    assert rules(GOOD) == []
    skipped = GOOD.replace("rpc_port = 8996", "rpc_port = 8996\nmetadata_delta_log_capacity = 5")
    assert ("unknown-key", "journal.metadata_delta_log_capacity") in rules(skipped)


@pytest.mark.parametrize(
    "entry",
    [
        "[NVME:500GB]/data",
        "/data/untyped",
        "[500GB]/data",
        "[SSD:500XB]/data",
        "[SSD:1:2]/data",
        "[SSD:1.5TB]/data",
    ],
)
def test_data_dirs_need_a_valid_tier(entry: str) -> None:
    text = GOOD.replace('"[ssd]/mnt/b"', f'"{entry}"')
    assert ("data-dir-tier", "worker.data_dir") in rules(text)


def test_master_hostname_must_be_a_journal_peer() -> None:
    text = GOOD.replace('hostname = "m-0.m.ns.svc.cluster.local"\nrpc_port', 'hostname = "m-9"\nrpc_port', 1)
    assert ("journal-hostname", "master.hostname") in rules(text)


def test_omitted_journal_addrs_default_to_localhost() -> None:
    assert cc.journal_findings({"master": {"hostname": "localhost"}}) == []
    assert cc.journal_findings({"master": {"hostname": "m-0"}}) != []


@pytest.mark.parametrize("flag", ["format_master", "format_worker"])
def test_format_flags_must_be_explicitly_false(flag: str) -> None:
    assert ("format-flag", flag) in rules(GOOD.replace(f"{flag} = false", f"{flag} = true"))
    assert ("format-flag", flag) in rules(GOOD.replace(f"{flag} = false\n", ""))


def test_invalid_toml_is_a_user_error_with_position() -> None:
    with pytest.raises(UserError, match=r"values\.toml: not valid TOML: .*line 2"):
        cc.check_text("a = 1\nb = = 2\n", "values.toml")


@pytest.mark.parametrize(
    ("log", "where"),
    [
        ({}, "stdout"),  # LogConf::default: log_dir = "stdout"
        ({"log_dir": ""}, "stdout"),
        ({"log_dir": "STDOUT"}, "stdout"),
        ({"log_dir": "stderr"}, "stderr"),
        ({"log_dir": "StdErr", "file_name": "cli"}, "stderr"),
        ({"log_dir": "/var/log/curvine"}, "/var/log/curvine/curvine.log"),
        ({"log_dir": "/var/log/curvine", "file_name": "cli.log"}, "/var/log/curvine/cli.log"),
        ({"log_dir": "/l", "file_name": ".log"}, "/l/curvine.log"),
    ],
)
def test_log_destination_follows_curvines_logger(log: dict[str, str], where: str) -> None:
    assert cc.log_destination(log) == where
