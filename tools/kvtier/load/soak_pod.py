"""The soak's hands on one L2 namespace: list its chunk files, damage one, move the namespace away and back.

One implementation for both places a soak runs: the rig imports it, and against a release the soak sends
this file's source to an engine pod (`python3 -c <source> <command> ...` through the API server's exec),
where the L2 volume is mounted. Standard library and PyYAML only (vLLM's own dependency), so it runs in
any engine image. Each command prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
from collections.abc import Collection
from pathlib import Path

# A chunk file's path below the namespace: LMCache's fs layout (one flat `<key>.data` per chunk), or vLLM's
# native fs tier's (`<model>_<12 hex>_r<rank>/<3 hex>/<2 hex>_g<group>/<hash>.bin`, l2_scan.NATIVE_CHUNK)
CHUNK_FILE = re.compile(
    r"[^/]+\.data|[^/]+_[0-9a-f]{12}_r[0-9]+/[0-9a-f]{3}/[0-9a-f]{2}_g[0-9]+/[0-9a-f]+\.bin"
)
ENGINE_CMDLINE = Path("/proc/1/cmdline")  # the engine container's own process: `vllm serve ...`
DAMAGES = ("change-chunks", "truncate-chunks", "delete-chunks")
PLUGIN_BASE_PATH = "remote_storage_plugin.kvtier_l2.base_path"  # the chart's LMCache config (_cache.tpl)
AWAY = ".away"


def namespace_dir(mount: Path, cmdline: Path = ENGINE_CMDLINE) -> Path:
    """The model's L2 namespace as this engine's LMCache config names it (the plugin's base_path, or the
    path of an `fs://` remote_url), or, with vLLM's native backend, the root_dir of the fs tier in the
    engine's --kv-transfer-config; `mount` itself when there is neither to read."""
    config = os.environ.get("LMCACHE_CONFIG_FILE")
    if not config or not Path(config).is_file():
        try:
            argv = cmdline.read_bytes().decode(errors="replace").split("\0")
        except OSError:
            return mount
        return native_root(argv) or mount
    import yaml

    settings = yaml.safe_load(Path(config).read_text()) or {}
    base = (settings.get("extra_config") or {}).get(PLUGIN_BASE_PATH)
    if base:
        return Path(base)
    url = str(settings.get("remote_url") or "")
    if url.startswith("fs://") and "/" in url[len("fs://") :]:
        return Path("/" + url[len("fs://") :].split("/", 1)[1])
    return mount


def native_root(argv: list[str]) -> Path | None:
    """The root_dir of the first fs tier (vLLM's `fs`, or the chart's sealed one) in a vLLM command line's
    --kv-transfer-config; None when there is none."""
    for i, arg in enumerate(argv):
        if arg == "--kv-transfer-config" and i + 1 < len(argv):
            text = argv[i + 1]
        elif arg.startswith("--kv-transfer-config="):
            text = arg.split("=", 1)[1]
        else:
            continue
        try:
            extra = json.loads(text).get("kv_connector_extra_config") or {}
        except (ValueError, AttributeError):
            return None
        for tier in extra.get("secondary_tiers") or []:
            if isinstance(tier, dict) and tier.get("root_dir"):
                return Path(tier["root_dir"])
    return None


def chunk_names(directory: Path) -> list[str]:
    """Final chunk files in `directory`, as paths below it (temp files, vLLM's config.json and other
    namespaces are not chunks of this one)."""
    names = []
    for folder, _dirs, files in os.walk(directory):  # nothing when the namespace is away or never written
        below = os.path.relpath(folder, directory)
        for name in files:
            relative = name if below == "." else f"{below}/{name}"
            if CHUNK_FILE.fullmatch(relative):
                names.append(relative)
    return sorted(names)


def _written_since(path: Path, since_ns: int) -> bool:
    try:
        return path.stat().st_mtime_ns >= since_ns
    except FileNotFoundError:
        return False


def damage(
    directory: Path, kind: str, since_ns: int, rng: random.Random, known: Collection[str] = ()
) -> str | None:
    """Damage one chunk file of this point's prompts, which its later requests read: one written since
    `since_ns`, or one of the `known` names (written for them before the point: a release's reference
    pass). Change 64 bytes in place with the size kept, cut it to half, or delete it. Its name, or None
    when there was none (or it vanished meanwhile: evicted, or refused and removed by the plugin)."""
    if kind not in DAMAGES:
        raise ValueError(f"unknown damage {kind!r}; expected one of {', '.join(DAMAGES)}")
    names = [n for n in chunk_names(directory) if n in known or _written_since(directory / n, since_ns)]
    if not names:
        return None
    name = rng.choice(names)  # names sorted: the seed decides
    path = directory / name
    try:
        if kind == "delete-chunks":
            path.unlink()
        else:
            data = bytearray(path.read_bytes())
            if kind == "truncate-chunks":
                data = data[: len(data) // 2]
            else:
                middle = len(data) // 2
                data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
            # A new file renamed over the chunk, not a rewrite in place: Curvine's FUSE (v0.4.1) records
            # files as root's and refuses the engines' user a reopen for writing (docs/eviction.md).
            temp = path.with_name(f".{path.name}.damage-{os.getpid()}")
            temp.write_bytes(bytes(data))
            os.replace(temp, path)
    except FileNotFoundError:
        return None
    return name


def away(directory: Path) -> None:
    """Move the namespace aside, as if the volume lost it."""
    directory.rename(directory.with_name(directory.name + AWAY))


def gone(directory: Path) -> bool:
    """Whether the namespace is away in fact: moved aside, and none of the moved chunk files seen at its path
    (an engine may have made the folder again meanwhile, never with those files)."""
    aside = directory.with_name(directory.name + AWAY)
    return aside.is_dir() and not set(chunk_names(directory)) & set(chunk_names(aside))


def back(directory: Path) -> None:
    """Bring it back; when an engine made the namespace again meanwhile, keep both sets of files (a file
    written again meanwhile is kept as written)."""
    aside = directory.with_name(directory.name + AWAY)
    if not directory.exists():
        aside.rename(directory)
        return
    for folder, _dirs, files in os.walk(aside, topdown=False):
        target = directory / os.path.relpath(folder, aside)
        target.mkdir(parents=True, exist_ok=True)
        for name in files:
            if (target / name).exists():
                os.remove(os.path.join(folder, name))
            else:
                os.rename(os.path.join(folder, name), target / name)
        os.rmdir(folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The soak's chunk-file faults in one L2 namespace.")
    parser.add_argument("command", choices=("where", "now", "list", "damage", "away", "gone", "back"))
    parser.add_argument("--mount", type=Path, required=True, help="the engine's L2 mount")
    parser.add_argument("--kind", choices=DAMAGES, default="change-chunks")
    parser.add_argument("--since-ns", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--known", default="", help="damage: comma-separated chunk names of this point")
    args = parser.parse_args(argv)
    directory = namespace_dir(args.mount)
    result: dict[str, object] = {"dir": str(directory)}
    if args.command == "now":
        result["now_ns"] = time.time_ns()
    elif args.command == "list":
        result["names"] = chunk_names(directory)
    elif args.command == "damage":
        known = set(filter(None, args.known.split(",")))
        result["name"] = damage(directory, args.kind, args.since_ns, random.Random(args.seed), known)
    elif args.command == "away":
        away(directory)
        result["gone"] = gone(directory)
    elif args.command == "gone":
        result["gone"] = gone(directory)
    elif args.command == "back":
        back(directory)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
