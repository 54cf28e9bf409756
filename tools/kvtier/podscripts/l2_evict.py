#!/usr/bin/env python3
"""Keeps the shared filesystem L2 useful and under a high watermark.

Neither LMCache's filesystem connector nor vLLM's native `fs` offloading tier ever deletes anything, so the L2
directory grows until the volume is full.
This script, run by the umbrella chart's CronJob (and importable by the toolkit), does three things per run:

1. **Dead namespaces first.** With `--live FILE` (the namespace directories the chart renders for the
   models it deploys), every other namespace directory belongs to a configuration no replica runs any
   more (another model revision, chunk size, TP, dtype, LMCache version): its chunks can never hit again.
   Once nothing in it was used or written for `--dead-grace` seconds (a rollout in progress still uses
   the old one), its files, temp files included, are removed, whatever the watermarks say.
2. **Stale temp files.** With `--stale-temp-age S`, a writer's temp file (l2_scan.is_temp_file) in the
   root or a live namespace whose mtime is more than S seconds old is removed, whatever the watermarks say:
   its writer died or failed to clean up (a chunk write takes seconds), so nobody will ever rename it.
3. **Least recently used next.** When the directory holds more than the high watermark, final chunk files
   (LMCache's `*.data`, vLLM's `*.bin`) are removed, least recently *used* first, until it is at or below the
   low watermark. With `--pins FILE` (the warmed prefixes the environment lists, `<namespace>/<prefix>` per
   line), the chunks named in each listed prefix's pin file (`<namespace>/.kvtier-warm/<prefix>.json`,
   written by the L2 warm-up) are never evicted here; a prefix no longer listed pins nothing.

    python3 l2_evict.py --dir D --high 85% --low 70% [--capacity 500Gi] [--min-age 120]
        [--live live-namespaces.txt --dead-grace 3600] [--stale-temp-age 3600] [--pins pinned-prefixes.txt]
        [--order last-use|written] [--max-files 100000] [--max-seconds 600] [--dry-run]

Why these rules (docs/eviction.md; the two backends' file layouts are in l2_scan.py, which this script
imports from beside it):
- a live namespace's file still being written (a temp file) is never touched, but counts towards the
  usage, nor is a chunk written less than `--min-age` seconds ago. Emptied hash directories of vLLM's
  tier stay (a writer may be about to rename into one);
- a temp file not written for `--stale-temp-age` is no write in flight any more: a chunk write takes
  seconds and moves the mtime as it goes. A writer stalled longer than that finds its temp gone, so its
  rename fails and that chunk is not stored: a miss later, never a wrong chunk;
- last use = the later of mtime (the write: a rename keeps it) and atime. Reads do not move atime on
  Curvine's FUSE mount (the kernel marks FUSE inodes S_NOATIME and Curvine's master changes atime only on
  an explicit setattr), so the engines' hit recorder (l2_hits.py) sets atime on each hit. Without it the
  order falls back to the write time;
- every lookup checks the file on disk, so a removed chunk is a clean miss on every replica (both backends;
  vLLM's tier caches a lookup's verdict for the request that asked, and a load that then fails is a miss);
- pins only hold chunks of live namespaces: a dead namespace goes entirely, pin files and pinned chunks
  included. A listed prefix without a pin file (the warm-up has not run yet) is reported, not an error; an
  unreadable or malformed pin file, or an entry in it that is not a path below its namespace, is reported
  and pins nothing.

Safety: nothing outside `--dir` is touched, and a file changed since the scan is kept (l2_scan.py says
how); each run removes at most `--max-files` files and stops after `--max-seconds`. Prints one JSON report
whose `summary` is one line; exits 0 when the directory ends at or below the high watermark, 1 when it
could not get there (young, rewritten or pinned files, or a work bound hit), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

if __package__:  # imported as kvtier.podscripts.l2_evict (the toolkit, the tests)
    from .l2_scan import NAMESPACE_DIR, PIN_DIR, PREFIX_NAME, Chunk, Remover, Scan, scan
else:  # run as a script from the pod's ConfigMap folder, where l2_scan.py sits beside it
    from l2_scan import NAMESPACE_DIR, PIN_DIR, PREFIX_NAME, Chunk, Remover, Scan, scan  # type: ignore[no-redef]

OK, FINDINGS, USAGE = 0, 1, 2
REPORT_NAMES = 20  # evicted file names listed in the report (the counts and bytes cover all)
ORDERS = ("last-use", "written")

_UNITS = {
    "": 1,
    "k": 10**3,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kKMGTP]i?|)B?\s*$")


class UsageError(ValueError):
    """A bad argument: the message says which and what was expected."""


def parse_size(text: str) -> int:
    """Bytes from a Kubernetes-style quantity: 123, 500Gi, 1.5T, 200G (decimal), 64Mi."""
    match = _SIZE.match(str(text))
    if not match or match.group(2) not in _UNITS:
        raise UsageError(f"size {text!r}: expected bytes or a quantity such as 500Gi, 1.5T, 200G")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def parse_watermark(text: str, capacity: int | None) -> int:
    """Bytes from a watermark: a percentage of the capacity ("85%") or a size ("400Gi")."""
    value = str(text).strip()
    if value.endswith("%"):
        try:
            percent = float(value[:-1])
        except ValueError:
            raise UsageError(f"watermark {text!r}: expected a percentage such as 85%") from None
        if not 0 < percent <= 100:
            raise UsageError(f"watermark {text!r}: a percentage must be in (0, 100]")
        if capacity is None:
            raise UsageError(
                f"watermark {text!r} is a percentage but the capacity is unknown: pass --capacity"
            )
        return int(capacity * percent / 100)
    return parse_size(value)


def read_live(path: str) -> set[str]:
    """The live namespace directory names: one per line, `#` comments and blank lines ignored."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError as exc:
        raise UsageError(
            f"--live {path!r}: {exc.strerror} (the chart mounts it from its ConfigMap)"
        ) from None
    names = {line.split("#", 1)[0].strip() for line in lines}
    names.discard("")
    bad = sorted(n for n in names if not NAMESPACE_DIR.fullmatch(n))
    if bad:
        raise UsageError(f"--live {path!r}: {bad[0]!r} is not a namespace directory name (<model>.<12 hex>)")
    return names


@dataclass
class Pins:
    """What the warm-up pinned: `files` are paths below the root (the form of Chunk.relpath); `missing` the
    listed prefixes without a pin file, `unreadable` "path: reason" for pin files (or entries) not used."""

    files: set[str] = field(default_factory=set)
    missing: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)


def pin_path(namespace: str, prefix: str) -> str:
    """A warmed prefix's pin file, relative to the L2 root."""
    return f"{namespace}/{PIN_DIR}/{prefix}.json"


def read_pin_listing(path: str) -> list[str]:
    """The listed prefixes, `<namespace dir>/<prefix name>` one per line, `#` comments and blank lines
    ignored; a malformed line is a UsageError naming the file and line."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise UsageError(f"--pins {path!r}: {reason} (the chart mounts it from its ConfigMap)") from None
    listed: list[str] = []
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        namespace, _, prefix = text.partition("/")
        if not (NAMESPACE_DIR.fullmatch(namespace) and PREFIX_NAME.fullmatch(prefix)):
            raise UsageError(
                f"--pins {path}:{number}: {text!r} is not <namespace dir>/<prefix name> "
                "(<model>.<12 hex>/<letters, digits, '-', '_', '.'; 63 at most>)"
            )
        if text not in listed:
            listed.append(text)
    return listed


def read_pins(directory: str, listing_path: str) -> Pins:
    """The chunk files pinned by the listed prefixes' pin files below `directory`. Only the listing's
    errors raise (UsageError); pin files that are missing or unusable are reported in the result."""
    pins = Pins()
    for listed in read_pin_listing(listing_path):
        namespace, _, prefix = listed.partition("/")
        relative = pin_path(namespace, prefix)
        try:
            with open(os.path.join(directory, relative), encoding="utf-8") as handle:
                content = json.load(handle)
        except FileNotFoundError:
            pins.missing.append(listed)  # the warm-up has not run (or not finished) yet
            continue
        except OSError as exc:
            pins.unreadable.append(f"{relative}: {exc.strerror}")
            continue
        except UnicodeDecodeError:
            pins.unreadable.append(f"{relative}: not UTF-8 text")
            continue
        except json.JSONDecodeError as exc:
            pins.unreadable.append(f"{relative}: not JSON ({exc.msg}, line {exc.lineno} column {exc.colno})")
            continue
        files = content.get("files") if isinstance(content, dict) else None
        if not isinstance(files, list):
            pins.unreadable.append(f'{relative}: expected a JSON object with a "files" list')
            continue
        ignored = []
        for index, entry in enumerate(files):
            # Only paths below the namespace can name one of its chunks.
            if isinstance(entry, str) and entry and ".." not in entry and not entry.startswith("/"):
                pins.files.add(f"{namespace}/{entry}")
            else:
                ignored.append(f"files[{index}] {entry!r}")
        if ignored:
            pins.unreadable.append(
                f"{relative}: {len(ignored)} entries ignored ({', '.join(ignored[:3])}"
                f"{', ...' if len(ignored) > 3 else ''}): expected paths relative to the namespace directory"
                " without '..'"
            )
    return pins


def lru_order(chunks: list[Chunk], order: str = "last-use") -> list[Chunk]:
    """Least recently used (or written) first; the path breaks ties so runs are reproducible."""
    if order == "written":
        return sorted(chunks, key=lambda c: (c.mtime_ns, c.relpath))
    return sorted(chunks, key=lambda c: (c.last_use_ns, c.relpath))


@dataclass
class _Budget:
    """The run's work bounds."""

    max_files: int
    deadline: float
    clock: Callable[[], float] = time.monotonic
    removed: int = 0

    def exhausted(self) -> str | None:
        if self.removed >= self.max_files:
            return f"max-files {self.max_files}"
        if self.clock() >= self.deadline:
            return "max-seconds"
        return None


def evict(
    directory: str,
    high: str,
    low: str,
    capacity: str | None = None,
    min_age_s: float = 0.0,
    dry_run: bool = False,
    now: float | None = None,
    live: set[str] | None = None,
    dead_grace_s: float = 3600.0,
    order: str = "last-use",
    max_files: int = 100_000,
    max_seconds: float = 600.0,
    rank: Callable[[list[Chunk]], list[Chunk]] | None = None,
    pins: Pins | None = None,
    stale_temp_s: float | None = None,
) -> dict[str, Any]:
    """Remove dead namespaces and, with `stale_temp_s`, temp files not written for that long; then bring
    the directory to the low watermark when it is above the high one, never evicting a chunk in `pins`
    (read_pins); return the report. `rank` replaces the LRU order
    (the eviction benchmark's offline optimum)."""
    if not os.path.isdir(directory):
        raise UsageError(f"--dir {directory!r} is not a directory (is the L2 volume mounted there?)")
    if order not in ORDERS:
        raise UsageError(f"--order {order!r}: expected one of {', '.join(ORDERS)}")
    if max_files < 1 or max_seconds <= 0:
        raise UsageError("--max-files and --max-seconds must be positive")
    if stale_temp_s is not None and not 0 < stale_temp_s < float("inf"):  # nan fails too
        raise UsageError(
            f"--stale-temp-age {stale_temp_s:g}: expected seconds above any chunk write (the chart's"
            " default is 3600); leave it out to keep temp files"
        )
    if capacity is not None:
        capacity_bytes: int | None = parse_size(capacity)
    else:
        stats = os.statvfs(directory)
        capacity_bytes = stats.f_blocks * stats.f_frsize
    high_bytes = parse_watermark(high, capacity_bytes)
    low_bytes = parse_watermark(low, capacity_bytes)
    if low_bytes > high_bytes:
        raise UsageError(f"--low {low} ({low_bytes} B) is above --high {high} ({high_bytes} B)")

    started = time.time() if now is None else now
    budget = _Budget(max_files, time.monotonic() + max_seconds)
    found = scan(directory, live)
    used = found.used_bytes
    pins = Pins() if pins is None else pins
    pinned = [c for c in found.chunks if c.relpath in pins.files]  # dead namespaces' chunks are not here
    report: dict[str, Any] = {
        "check": "l2-evict",
        "dir": directory,
        "dry_run": dry_run,
        "order": order,
        "capacity_bytes": capacity_bytes,
        "high_bytes": high_bytes,
        "low_bytes": low_bytes,
        "used_bytes_before": used,
        "chunk_files": len(found.chunks),
        "temp_files": found.temp_files,
        "temp_bytes": found.temp_bytes,
        "dead_namespaces": sorted(found.dead),
        "dead_namespaces_in_grace": [],
        "dead_files": 0,
        "dead_bytes": 0,
        "stale_temp_age_s": stale_temp_s,
        "stale_temp_files": 0,
        "stale_temp_bytes": 0,
        "evicted_files": 0,
        "evicted_bytes": 0,
        "evicted": [],
        "skipped_young": 0,
        "skipped_rewritten": 0,
        "skipped_pinned": 0,
        "pinned_files": len(pinned),
        "pinned_bytes": sum(c.size for c in pinned),
        "pins_missing": list(pins.missing),
        "pins_unreadable": list(pins.unreadable),
        "vanished": 0,
        "stopped": None,
    }
    remover = Remover(directory, dry_run)
    try:
        used = _remove_dead(found, remover, budget, report, used, int((started - dead_grace_s) * 1e9))
        if stale_temp_s is not None and report["stopped"] is None:
            used = _remove_stale_temps(
                found.temps, remover, budget, report, used, int((started - stale_temp_s) * 1e9)
            )
        if used > high_bytes and report["stopped"] is None:
            ordered = rank(found.chunks) if rank is not None else lru_order(found.chunks, order)
            used = _remove_lru(
                ordered,
                remover,
                budget,
                report,
                used,
                low_bytes,
                int((started - min_age_s) * 1e9),
                pins.files,
            )
    finally:
        remover.close()
    report["used_bytes_after"] = used
    report["ok"] = used <= high_bytes
    verb = "would remove" if dry_run else "removed"
    # The pass went past pinned chunks and still ended above the high watermark: the pins are part of why.
    held_by_pins = not report["ok"] and report["stopped"] is None and report["skipped_pinned"] > 0
    report["summary"] = (
        f"{verb} {report['dead_files']} dead-namespace files ({report['dead_bytes']} B, "
        f"{len(found.dead) - len(report['dead_namespaces_in_grace'])} of {len(found.dead)} dead namespaces)"
        + (
            f", {report['stale_temp_files']} stale temp files ({report['stale_temp_bytes']} B)"
            if stale_temp_s is not None
            else ""
        )
        + f" and {report['evicted_files']} live chunk files ({report['evicted_bytes']} B, {order} order); "
        f"used {report['used_bytes_before']} -> {used} B (high {high_bytes} B, low {low_bytes} B)"
        + (f"; stopped at {report['stopped']}" if report["stopped"] else "")
        + (f"; {report['pinned_bytes']} B pinned by the warm-up" if held_by_pins else "")
    )
    return report


def _remove_dead(
    found: Scan, remover: Remover, budget: _Budget, report: dict, used: int, idle_before_ns: int
) -> int:
    for name in sorted(found.dead):
        held = found.dead[name]
        if held.newest_use_ns > idle_before_ns:
            report["dead_namespaces_in_grace"].append(name)
            continue
        used = _remove_counted(held.files, remover, budget, report, used, "dead")
        if report["stopped"]:
            return used
        remover.prune(name)
    return used


def _remove_stale_temps(
    temps: list[Chunk], remover: Remover, budget: _Budget, report: dict, used: int, written_before_ns: int
) -> int:
    """Remove the temp files last written before `written_before_ns`: orphans of writers that died or
    failed to clean up. One written to since the scan (a live writer) changed its mtime, and is kept."""
    stale = [
        t for t in sorted(temps, key=lambda t: (t.mtime_ns, t.relpath)) if t.mtime_ns < written_before_ns
    ]
    return _remove_counted(stale, remover, budget, report, used, "stale_temp")


def _remove_counted(
    files: list[Chunk], remover: Remover, budget: _Budget, report: dict, used: int, counted: str
) -> int:
    """Remove `files` in order, whatever the watermarks, until the budget runs out (report["stopped"]);
    each one removed counts in `<counted>_files` and `<counted>_bytes`. The bytes still used."""
    for file in files:
        report["stopped"] = budget.exhausted()
        if report["stopped"]:
            break
        outcome = _remove_one(file, remover, budget, report)
        if outcome != "rewritten":
            used -= file.size
        if outcome == "removed":
            report[f"{counted}_files"] += 1
            report[f"{counted}_bytes"] += file.size
    return used


def _remove_one(chunk: Chunk, remover: Remover, budget: _Budget, report: dict) -> str:
    """Remove one scanned file unless it changed since the scan: "removed", "rewritten" (kept) or
    "vanished" (someone else removed it; its space is free all the same)."""
    outcome = remover.remove_unchanged(chunk)
    if outcome == "rewritten":
        report["skipped_rewritten"] += 1
    elif outcome == "vanished":
        report["vanished"] += 1
    else:
        budget.removed += 1
    return outcome


def _remove_lru(
    ordered: list[Chunk],
    remover: Remover,
    budget: _Budget,
    report: dict,
    used: int,
    low_bytes: int,
    young_after_ns: int,
    pinned: set[str],
) -> int:
    for chunk in ordered:
        if used <= low_bytes:
            break
        report["stopped"] = budget.exhausted()
        if report["stopped"]:
            break
        if chunk.relpath in pinned:
            report["skipped_pinned"] += 1
            continue
        if chunk.mtime_ns > young_after_ns:
            report["skipped_young"] += 1
            continue
        outcome = _remove_one(chunk, remover, budget, report)
        if outcome != "rewritten":
            used -= chunk.size
        if outcome != "removed":
            continue
        report["evicted_files"] += 1
        report["evicted_bytes"] += chunk.size
        if len(report["evicted"]) < REPORT_NAMES:
            report["evicted"].append(chunk.relpath)
    return used


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Remove dead L2 namespaces and evict L2 chunks (LRU; LMCache and vLLM fs-tier layouts)."
    )
    parser.add_argument("--dir", required=True, help="the L2 root (the umbrella's cache.l2.mountPath)")
    parser.add_argument("--high", required=True, help="start evicting above this: 85%% or a size (400Gi)")
    parser.add_argument("--low", required=True, help="evict down to this: 70%% or a size")
    parser.add_argument("--capacity", help="volume size for percentages (default: the filesystem size)")
    parser.add_argument(
        "--min-age", type=float, default=0.0, help="never evict chunks written less than this ago (s)"
    )
    parser.add_argument("--live", help="file naming the live namespace directories; others are dead")
    parser.add_argument(
        "--dead-grace", type=float, default=3600.0, help="a dead namespace idle this long (s) goes"
    )
    parser.add_argument(
        "--stale-temp-age",
        type=float,
        help="remove writers' temp files not written for this long (s); left out: temp files stay",
    )
    parser.add_argument(
        "--pins",
        help="file listing the warmed prefixes (<namespace>/<prefix>); their pinned chunks are never evicted",
    )
    parser.add_argument(
        "--order", default="last-use", choices=ORDERS, help="last-use (atime or mtime) or written"
    )
    parser.add_argument(
        "--max-files", type=int, default=100_000, help="remove at most this many files per run"
    )
    parser.add_argument("--max-seconds", type=float, default=600.0, help="stop removing after this long (s)")
    parser.add_argument("--dry-run", action="store_true", help="report what would be removed, remove nothing")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return USAGE if exc.code else OK
    try:
        live = read_live(args.live) if args.live else None
        pins = read_pins(args.dir, args.pins) if args.pins else None
        report = evict(
            args.dir,
            args.high,
            args.low,
            capacity=args.capacity,
            min_age_s=args.min_age,
            dry_run=args.dry_run,
            live=live,
            dead_grace_s=args.dead_grace,
            order=args.order,
            max_files=args.max_files,
            max_seconds=args.max_seconds,
            pins=pins,
            stale_temp_s=args.stale_temp_age,
        )
    except UsageError as exc:
        print(json.dumps({"check": "l2-evict", "ok": False, "summary": str(exc)}))
        return USAGE
    print(json.dumps(report, sort_keys=True))
    return OK if report["ok"] else FINDINGS


if __name__ == "__main__":
    sys.exit(main())
