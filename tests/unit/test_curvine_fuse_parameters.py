"""StorageClass parameters curvine-csi forwards to curvine-fuse (kvtier.upstream.curvine_fuse, the rule
curvine-fuse-parameters): held to the real curvine-fuse v0.4.1 binary where ../shared/curvine has it."""

from __future__ import annotations

import json
import random
import re
import subprocess
from pathlib import Path

import pytest

from kvtier import paths
from kvtier.cluster.realnode import curvine_binaries
from kvtier.upstream import curvine_fuse
from kvtier.validate.checks import curvine_rules
from kvtier.validate.layers import schema_pattern
from kvtier.validate.rules import ValuesContext

# Keys curvine-csi owns or refuses (fuse_cli.go) and the schema forbids: never forwarded as written.
CSI_OWNED = {
    "master-addrs",
    "fs-path",
    "mnt-path",
    "conf",
    "curvine-path",
    "path-type",
    "author",
    "volume-handle",
}
VALUES = {
    "bool": ["true", "false", "True", "yes", "1", "-true"],
    "u16": ["0", "1", "64", "192", "256", "+300", "65535", "65536", "-1", "1.5", "0x10", " 8", "8k"],
    "u32": ["0", "7", "4294967295", "4294967296", "1e3"],
    "u64": ["0", "1", "8", "05", "+5", "18446744073709551615", "18446744073709551616", "-3", "2.0", "ten"],
    "i32": ["1", "3", "2147483647", "2147483648", "-1"],
    "i64": ["2", "0", "9223372036854775807", "9223372036854775808"],
    "duration": [
        "30s",
        "2m",
        "1.5H",
        "1h",
        "500",
        "500ms",
        "1e3",
        " 5s",
        "10x",
        "-1s",
        "s",
        "1.5.2s",
        ".5d",
        "1day",
        "90second",
    ],
    "size": [
        "64MB",
        "128kb",
        "1.5G",
        "64",
        "0",
        " 4 MB",
        "1e3K",
        "64XB",
        "MB",
        "64MiB",
        "5EB",
        "18446744073709551616",
    ],
    "storage-type": ["disk", "MEM", "Ssd", "spdk_disk", "nvme", "ram"],
    "ttl-action": ["none", "DELETE", "Free", "evict"],
    "octal": ["022", "0o22", "0O7", " 002 ", "+17", "8", "0o", "0x12", "77777777777"],
    "text": ["allow_other", "x", "-", "-x"],
    "switch": ["true"],
}
MISSPELT = [
    "entry-timeout",
    "node-cache-size",
    "io_threads",
    "readahead",
    "client.blocksize",
    "help",
    "version",
]


def _binary() -> Path:
    if curvine_binaries.missing():
        pytest.skip(f"the Curvine v0.4.1 binaries are not here: {curvine_binaries.missing()}")
    return curvine_binaries.verified().paths["curvine-fuse"]


def _chart_fuse_keys() -> set[str]:
    """The keys the chart's curvine-cluster.toml sets in [fuse] (charts/curvine templates/_config.tpl)."""
    text = (paths.ROOT / "charts" / "curvine" / "templates" / "_config.tpl").read_text()
    section = text.split("\n[fuse]\n", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^([a-z_]+) =", section, re.M))


def test_the_defaults_the_model_compares_with_are_the_charts() -> None:
    """The model compares the flags with FuseConf's defaults of the [fuse] keys FuseConf::init checks across
    flags: true only while the chart's [fuse] table sets none of them."""
    across = {"max_background", "congestion_threshold", "direct_io", "write_back_cache", "io_threads"}
    across |= {"mnt_number", "list_limit"}
    assert not _chart_fuse_keys() & across, "curvine_fuse.DEFAULTS: read the chart's [fuse] values too"


def test_flag_names_are_the_binarys() -> None:
    listed = json.loads(
        subprocess.run(
            [_binary(), "list-config-flags", "--format", "json"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
    )
    names = {f["long"] for f in listed["flags"]}
    takes = {f["long"] for f in listed["flags"] if f["takes_value"]}
    assert names == curvine_fuse.known_flags() - {"mnt-per-task"}  # an alias: clap does not list it
    assert {k for k, kind in curvine_fuse.MOUNT_FLAGS.items() if kind != "switch"} - {"mnt-per-task"} <= takes


def _generated(rng: random.Random) -> dict[str, str]:
    params: dict[str, str] = {}
    for _ in range(rng.choice((1, 1, 2, 3))):
        roll = rng.random()
        if roll < 0.1:
            key = rng.choice(MISSPELT)
            params[key] = "1"
        else:
            flags = {**curvine_fuse.MOUNT_FLAGS, **curvine_fuse.CLIENT_FLAGS}
            key = rng.choice(
                sorted(set(curvine_fuse.MOUNT_FLAGS) - CSI_OWNED)
                if roll < 0.55
                else sorted(curvine_fuse.CLIENT_FLAGS)
            )
            pool = VALUES[flags[key]]
            # valid values more often, so that the init checks across flags are reached
            params[key] = rng.choice(pool[:4] if rng.random() < 0.6 else pool)
    return params


def _accepts(binary: Path, conf: Path, params: dict[str, str]) -> bool:
    argv = [
        str(binary),
        "validate-config",
        "--conf",
        str(conf),
        "--master-addrs",
        "m-0:8995",
        "--fs-path",
        "/l2",
    ]
    for key in sorted(params):  # curvine-csi's order (appendPassthroughArgs)
        argv += [f"--{key}", params[key]]
    return subprocess.run(argv, capture_output=True, timeout=30).returncode == 0


def test_the_model_agrees_with_curvine_fuse_validate_config(tmp_path: Path) -> None:
    """Generated parameters: the model refuses exactly what `curvine-fuse validate-config` refuses (the run
    curvine-csi makes), with the chart's [fuse] table in the config. --help and --version are left out: they
    print and exit 0 there, and the model refuses them because the mount then never happens."""
    binary = _binary()
    conf = tmp_path / "curvine-cluster.toml"
    conf.write_text(f'[fuse]\nweb_port = 9002\nuid = 1000\ngid = 1000\nstate_dir = "{tmp_path / "state"}"\n')
    rng = random.Random(64)
    disagree, refused, total = [], 0, 0
    for _ in range(600):
        params = _generated(rng)
        if set(params) & curvine_fuse.PRINT_AND_EXIT:
            continue
        total += 1
        model = not curvine_fuse.refusals(params)
        refused += not model
        if model != _accepts(binary, conf, params):
            disagree.append((params, model))
    assert not disagree, disagree[:10]
    assert 0.25 * total < refused < 0.85 * total  # both verdicts well exercised


@pytest.mark.parametrize(
    ("params", "key"),
    [
        ({"entry-timeout": "1"}, "entry-timeout"),  # renamed entry-timeout-ms before v0.4.1
        ({"readonly": "true"}, "readonly"),  # a switch: "true" is an unexpected argument
        ({"direct-io": "yes"}, "direct-io"),
        ({"max-background": "64"}, "max-background"),  # under the default congestion_threshold 192
        ({"max-background": "64", "congestion-threshold": "100"}, "congestion-threshold"),
        ({"meta-cache-ttl": "10x"}, "meta-cache-ttl"),
        ({"io-threads": "0"}, "io-threads"),
        ({"web-port": "70000"}, "web-port"),
        ({"direct-io": "true", "write-back-cache": "true"}, "write-back-cache"),
        ({"help": "true"}, "help"),
        ({"client.block-size": "64MiB"}, "client.block-size"),
        ({"client.storage-type": "nvme"}, "client.storage-type"),
        ({"client.umask": "0x12"}, "client.umask"),
    ],
)
def test_refused(params: dict[str, str], key: str) -> None:
    assert [r.key for r in curvine_fuse.refusals(params)] == [key]


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"web-port": "9012"},
        {"max-background": "64", "congestion-threshold": "48"},
        {"mnt-per-task": "4", "io-threads": "+8"},
        {"meta-cache-ttl": "1.5H", "node-cache-timeout": "500"},
        {"client.block-size": "64MB", "direct-io": "true"},
        {"client.umask": "0o022", "client.storage-type": "ssd", "client.ttl-ms": "7d"},
        {"io-threads": ""},  # curvine-csi forwards no empty value
    ],
)
def test_accepted(params: dict[str, str]) -> None:
    assert curvine_fuse.refusals(params) == []


def _ctx(params: object, **curvine: object) -> ValuesContext:
    values = {"curvine": {"enabled": True, "storageClass": {"fuseParameters": params}, **curvine}}
    return ValuesContext(values=values, loaded=None)  # type: ignore[arg-type]


def test_rule_names_the_parameter() -> None:
    [hit] = list(curvine_rules.fuse_parameters(_ctx({"entry-timeout": "1", "web-port": "9012"})))
    assert hit.path == ("curvine", "storageClass", "fuseParameters", "entry-timeout")
    assert "no --entry-timeout flag" in hit.message and hit.severity == "error"


def test_rule_quiet_without_the_class_or_curvine() -> None:
    assert not list(curvine_rules.fuse_parameters(_ctx({"bogus": "1"}, storageClass={"enabled": False})))
    assert not list(curvine_rules.fuse_parameters(_ctx({"bogus": "1"}, enabled=False)))
    assert not list(curvine_rules.fuse_parameters(_ctx({"io-threads": 8})))  # the schema's: not a string


def _schema_key_pattern() -> re.Pattern[str]:
    """The key pattern the chart's schema gives storageClass.fuseParameters, with Helm's Go semantics."""
    schema = json.loads((paths.CHARTS / "curvine" / "values.schema.json").read_text())
    names = schema["properties"]["storageClass"]["properties"]["fuseParameters"]["propertyNames"]
    return schema_pattern.compile_as_go(names["pattern"])


def test_the_schema_lets_every_flag_curvine_fuse_has_through() -> None:
    """The chart's schema must not refuse what the binary takes (the client.* overrides included), so the
    rule, not the schema, judges the value."""
    pattern = _schema_key_pattern()
    refused = sorted(f for f in curvine_fuse.known_flags() if not pattern.search(f))
    assert not refused, f"the schema refuses flags curvine-fuse has: {refused}"
    assert any(f.startswith("client.") for f in curvine_fuse.known_flags())
    for bad in ("Client.umask", "client.", "client..umask", "--umask", "a.b"):
        assert not pattern.search(bad), bad
