"""Wraps LMCache's connector factory once `lmcache.v1.gpu_connector` is imported, not before.

Importing LMCache from the plugin entry point broke vLLM's CPU worker start (measured), so the plugin
arms a meta-path finder instead: when LMCache itself imports its GPU-connector module, the finder runs
that module and then replaces `CreateGPUConnector` with a wrapper that answers for the vLLM engine on
the `cpu` device only.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import sys
from types import ModuleType
from typing import Any

TARGET = "lmcache.v1.gpu_connector"
log = logging.getLogger("lmcache_cpu_copy")


def wrap_factory(module: ModuleType) -> None:
    original = module.CreateGPUConnector
    if getattr(original, "_lmcache_cpu_copy", False):
        return

    def create(config: Any, metadata: Any, engine: Any, layout_hints: Any = None) -> Any:
        from lmcache import torch_device_type
        from lmcache.utils import EngineType

        if engine == EngineType.VLLM and torch_device_type == "cpu":
            from lmcache_cpu_copy.connector import CPUPagedKVConnector

            log.warning("lmcache-cpu-copy: torch stand-in for LMCache's CUDA KV copy (test rig only)")
            return CPUPagedKVConnector.from_metadata(metadata)
        return original(config, metadata, engine, layout_hints=layout_hints)

    create._lmcache_cpu_copy = True  # type: ignore[attr-defined]
    module.CreateGPUConnector = create  # type: ignore[attr-defined]


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        wrap_factory(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name != TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


def install() -> None:
    module = sys.modules.get(TARGET)
    if module is not None:
        wrap_factory(module)
        return
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
