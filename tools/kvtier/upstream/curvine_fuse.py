"""What curvine-fuse v0.4.1 makes of the StorageClass parameters curvine-csi forwards to it.

curvine-csi v0.4.1 forwards every StorageClass parameter it does not own (master-addrs, fs-path, path-type,
curvine-path, author, volume-handle; mnt-path is refused) as `--<key> <value>`
(curvine-csi/pkg/csi/fuse_cli.go CollectPassthroughParams, appendPassthroughArgs), and runs
`curvine-fuse validate-config` with them before it provisions a volume (controller.go CreateVolume, an
InvalidArgument the provisioner retries forever) and before each mount (node.go NodeStageVolume).

curvine-fuse parses them with clap (curvine-fuse/src/cli/fuse_cli.rs, mount_args.rs FuseMountArgs,
curvine-config's generated ClientConfCliOverrides for `client.*`): an unknown flag, a value for a flag that
takes none, a value clap's parser refuses (`true`/`false` only for bools; a whole number in range for the
integer types) or a value starting with `-` (read as another flag) ends it with exit 2. It then loads the
cluster config, applies the flags and runs FuseConf::init (crates/common/curvine-config/src/fuse_conf.rs),
which refuses zero io_threads, mnt_number, list_limit or max_background, a congestion_threshold of 0 or
above max_background (defaults 256 and 192: the chart's [fuse] sets neither), a duration DurationUnit
cannot read (crates/core/runtime/src/common/duration_unit.rs), and direct_io with write_back_cache.

The flag names are those `curvine-fuse list-config-flags --format json` prints (the real binary; the
differential test in tests/unit/test_curvine_fuse_parameters.py holds this table to it). Values of the
`client.*` flags are not judged here (their parsers are generated from ClientConf; client.init's checks
are not modelled): only their names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

VERSION = "0.4.1"

# FuseMountArgs (mount_args.rs): long flag -> how clap reads its value.
# "bool": clap's bool parser; "u16"/"u64": an unsigned integer of that width (usize is 64-bit on the
# amd64 images); "duration": a string FuseConf::init reads with DurationUnit; "text": any string;
# "switch": a flag that takes no value.
MOUNT_FLAGS: dict[str, str] = {
    "mnt-path": "text",
    "fs-path": "text",
    "mnt-number": "u64",
    "debug": "switch",
    "conf": "text",
    "io-threads": "u64",
    "worker-threads": "u64",
    "tasks-per-mnt": "u64",
    "mnt-per-task": "u64",  # clap alias of tasks-per-mnt, kept for old mount scripts
    "clone-fd": "bool",
    "fuse-channel-size": "u64",
    "stream-channel-size": "u64",
    "direct-io": "bool",
    "cache-readdir": "bool",
    "entry-timeout-ms": "u64",
    "attr-timeout-ms": "u64",
    "negative-timeout-ms": "u64",
    "max-background": "u16",
    "congestion-threshold": "u16",
    "node-cache-timeout": "duration",
    "web-port": "u16",
    "master-addrs": "text",
    "options": "text",
    "readonly": "switch",
    "read-dir-fill-ino": "bool",
    "write-back-cache": "bool",
    "non-seekable": "bool",
    "check-permission": "bool",
    "metrics-enabled": "bool",
    "enable-meta-cache": "bool",
    "meta-cache-ttl": "duration",
    "remember": "bool",
    "list-limit": "u64",
    "version-json": "switch",  # FuseCli's global flag
}
# ClientConfCliOverrides (curvine-config, generated from ClientConf): `--client.<field>`.
_CLIENT_NAMES = """
    audit-logging-enabled auto-cache-enabled auto-cache-ttl block-conn-idle-size
    block-conn-idle-time block-size clean-task-interval close-timeout-secs
    conn-retry-max-duration-ms conn-retry-max-sleep-ms conn-retry-min-sleep-ms conn-timeout-ms
    data-timeout-ms drop-cache-len enable-block-conn-pool enable-read-ahead enable-rust-read-ufs
    enable-smart-prefetch enable-unified-fs failed-worker-ttl hostname io-threads large-file-size
    master-conn-pool-size max-cache-block-handles max-read-parallel max-sync-wait-timeout
    metric-report-enable mount-update-ttl read-ahead-len read-chunk-num read-chunk-size
    read-parallel read-slice-size replicas rpc-close-idle rpc-retry-max-duration-ms
    rpc-retry-max-sleep-ms rpc-retry-min-sleep-ms rpc-timeout-ms sequential-read-threshold
    short-circuit small-file-size storage-type sync-check-interval-max sync-check-interval-min
    sync-check-log-tick ttl-action ttl-ms umask worker-threads write-chunk-num write-chunk-size
"""
CLIENT_FLAGS = frozenset("client." + name for name in _CLIENT_NAMES.split())
# clap's own flags: they print and exit 0, so curvine-fuse never mounts.
PRINT_AND_EXIT = frozenset({"help", "version"})
# FuseConf::default (fuse_conf.rs) for what init compares a flag with.
DEFAULTS = {"max-background": 256, "congestion-threshold": 192}
_WIDTH = {"u16": 16, "u64": 64}
_POSITIVE = ("io-threads", "mnt-number", "list-limit", "max-background")
_DURATION_UNITS = {"s", "second", "m", "minute", "h", "hour", "d", "day", "ms", ""}
_NUMBER_CHARS = re.compile(r"^[0-9.e+-]*")


@dataclass(frozen=True)
class Refusal:
    key: str  # the parameter it is about
    why: str  # what curvine-fuse does with it


def known_flags() -> frozenset[str]:
    return frozenset(MOUNT_FLAGS) | CLIENT_FLAGS


def unsigned(text: str, bits: int) -> int | None:
    """The value of clap's unsigned integer parsers (Rust from_str: an optional `+`, digits), or None."""
    digits = text[1:] if text.startswith("+") else text
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    n = int(digits)
    return n if n < 2**bits else None


def duration_ok(text: str) -> bool:
    """Whether DurationUnit::from_str reads `text` (trimmed, lower-cased; a number, then a unit)."""
    s = text.strip().lower()
    if not s.isascii():
        return False
    number = _NUMBER_CHARS.match(s)
    size = number.group(0) if number else ""
    unit = s[len(size) :].strip()
    if unit not in _DURATION_UNITS:
        return False
    if unit in ("ms", "") and size.isdigit():
        return int(size) < 2**64
    return _rust_float(size)


def _rust_float(text: str) -> bool:
    """Rust's f64::from_str on the characters DurationUnit lets through (digits . e + -)."""
    return re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)(e[+-]?[0-9]+)?", text) is not None


def _kind(key: str) -> str | None:
    if key in MOUNT_FLAGS:
        return MOUNT_FLAGS[key]
    return "text" if key in CLIENT_FLAGS else None


def refusals(params: dict[str, str]) -> list[Refusal]:
    """Why `curvine-fuse validate-config` refuses these forwarded parameters; empty when it accepts them."""
    found: list[Refusal] = []
    numbers: dict[str, int] = {}
    for key, value in params.items():
        if value == "":
            continue  # curvine-csi forwards no empty value
        kind = _kind(key)
        if key in PRINT_AND_EXIT:
            found.append(
                Refusal(key, f"--{key} makes curvine-fuse print its {key} and exit: it never mounts")
            )
        elif kind is None:
            found.append(
                Refusal(key, f"curvine-fuse {VERSION} has no --{key} flag (clap: unexpected argument)")
            )
        elif kind == "switch":
            found.append(
                Refusal(key, f"--{key} takes no value; the {value!r} after it is an unexpected argument")
            )
        elif value.startswith("-") and value != "-":
            found.append(Refusal(key, f"the value {value!r} starts with '-': clap reads it as another flag"))
        elif kind == "bool" and value not in ("true", "false"):
            found.append(Refusal(key, f"{value!r} is not a boolean to clap (only true or false)"))
        elif kind in _WIDTH:
            n = unsigned(value, _WIDTH[kind])
            if n is None:
                found.append(
                    Refusal(key, f"{value!r} is not a whole number from 0 to {2 ** _WIDTH[kind] - 1}")
                )
            else:
                numbers[key] = n
        elif kind == "duration" and not duration_ok(value):
            found.append(
                Refusal(key, f"{value!r} is not a duration Curvine reads (a number, then d, h, m, s or ms)")
            )
    if params.get("tasks-per-mnt") and params.get("mnt-per-task"):
        found.append(
            Refusal("mnt-per-task", "an alias of tasks-per-mnt, also given: clap takes one only once")
        )
    if found:
        return found  # clap stops at the first of these, before any check below
    return _init_refusals(params, numbers)


def _init_refusals(params: dict[str, str], numbers: dict[str, int]) -> list[Refusal]:
    """FuseConf::init's checks on the values the flags set (the config's defaults elsewhere)."""
    found = [
        Refusal(k, f"fuse.{k.replace('-', '_')} must be above 0") for k in _POSITIVE if numbers.get(k) == 0
    ]
    if found:
        return found
    background = numbers.get("max-background", DEFAULTS["max-background"])
    congestion = numbers.get("congestion-threshold", DEFAULTS["congestion-threshold"])
    if congestion == 0 or congestion > background:
        key = "congestion-threshold" if "congestion-threshold" in numbers else "max-background"
        found.append(
            Refusal(
                key,
                f"congestion_threshold {congestion} must be above 0 and at most max_background {background} "
                f"(FuseConf defaults: max_background {DEFAULTS['max-background']}, congestion_threshold "
                f"{DEFAULTS['congestion-threshold']})",
            )
        )
    elif params.get("direct-io") == "true" and params.get("write-back-cache") == "true":
        found.append(Refusal("write-back-cache", "direct-io and write-back-cache cannot both be true"))
    return found
