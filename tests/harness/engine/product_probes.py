"""The product's engine probes (tools/kvtier/engine_rig: vllm_args_probe, offload_stand_in) for the probes
here, which run by path in the engine venv, where kvtier is not installed: they import this module by its
file name (their own folder is first on sys.path) and load a product probe the same way."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

ENGINE_RIG = Path(__file__).resolve().parents[3] / "tools" / "kvtier" / "engine_rig"


def load(name: str) -> ModuleType:
    if str(ENGINE_RIG) not in sys.path:
        sys.path.insert(1, str(ENGINE_RIG))
    return importlib.import_module(name)
