"""Every path a kvtier module names into the project's own sources exists: a module moved to another
folder that still builds a sibling's path from its own `__file__` fails here, not in the one test kind
that opens the file (the real-node umbrella did, 2026-12-03)."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import kvtier
from kvtier import paths

SOURCES = (paths.ROOT / "tools", paths.ROOT / "toolchain", paths.CHARTS, paths.SCHEMA, paths.VALUES)
# Run by path in other venvs (the engine's), so not importable here.
ELSEWHERE = ("_probe", "_dump", "offload_stand_in", "vllm_cli", "tinymodel")


def _module_paths() -> list[tuple[str, str, Path]]:
    found = []
    for info in pkgutil.walk_packages(kvtier.__path__, "kvtier."):
        if info.name.rsplit(".", 1)[-1].endswith(ELSEWHERE):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, Path) and any(value.is_relative_to(s) for s in SOURCES):
                found.append((info.name, name, value))
    return found


def test_every_source_path_a_module_names_exists() -> None:
    named = _module_paths()
    assert len(named) >= 10, f"too few source paths found to mean anything: {named}"
    missing = [f"{module}.{name} = {path}" for module, name, path in named if not path.exists()]
    assert not missing, "paths into the sources that do not exist:\n" + "\n".join(missing)
