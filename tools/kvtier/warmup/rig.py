"""`kvtier warm --rig`: the warm-up on this machine's CPU rig (two replicas of the container the chart
renders for values/cpu.yaml on one shared L2), from a prefixes file in the values' shape."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from kvtier.engine_rig import tiers
from kvtier.errors import UserError
from kvtier.podscripts import l2_warm


def load(path: Path) -> list[l2_warm.Prefix]:
    """A YAML file of one model's prefixes, as under cache.warmup.prefixes.<model>: `<name>: {text | messages
    | file, cacheSalt}` (a `file` is read from this machine)."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as error:
        raise UserError(f"--prefixes {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise UserError(f"--prefixes {path}: not UTF-8 text (expected a YAML map of prefixes)") from None
    except yaml.YAMLError as error:
        raise UserError(f"--prefixes {path}: not YAML ({error})") from None
    if not isinstance(data, dict) or not data:
        raise UserError(f"--prefixes {path}: expected a map of prefix name -> {{text | messages | file}}")
    entries = []
    for name, spec in data.items():
        if spec is None:  # removed, as a values file's null removes it
            continue
        if not isinstance(spec, dict):
            raise UserError(f"--prefixes {path}: {name}: expected a map with text, messages or file")
        entries.append({"name": str(name), **spec})
    if not entries:
        raise UserError(f"--prefixes {path}: every prefix is null; nothing to warm")
    try:
        return l2_warm.parse_prefixes(entries, f"--prefixes {path}")
    except l2_warm.WarmError as error:
        raise UserError(str(error)) from None


def run(
    prefixes: list[l2_warm.Prefix], work: Path, backend: str, log: Callable[[str], None]
) -> dict[str, Any]:
    """Start two replicas, warm through the first, verify on the second; the warm-up's report."""
    with tiers.TieredRig(work, replicas=2, backend=backend, log=log) as rig:
        assert rig.l2_dir is not None
        settings = l2_warm.Settings(
            tiers.MODEL_NAME, rig.chunk_size, str(rig.l2_dir), True, 120.0, 300.0, log
        )
        outcomes, stale = l2_warm.warm(prefixes, [p.url for p in rig.started], settings)
    return l2_warm.report(outcomes, stale)
