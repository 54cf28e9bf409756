"""Checks an LMCache config file with LMCache's own loader (`LMCacheEngineConfig.from_file`).

LMCache ignores a key it does not know and only logs a warning, so a typo silently falls back to a
default (a wrong chunk size breaks cross-pod hits without an error). This module loads the rendered
YAML exactly as the engine would and turns every warning LMCache logs, and every error it raises,
into a finding. Needs PyPI `lmcache` installed without its dependencies (`pip install --no-deps
lmcache`) plus pyyaml and requests: the config module imports neither torch nor a GPU runtime.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvtier.errors import UserError

INSTALL_HINT = (
    "install LMCache's config loader: .venv/bin/pip install --no-deps lmcache (plus pyyaml, requests)"
)


@dataclass
class ConfigCheck:
    """Outcome of loading one config: the values LMCache read and what it complained about."""

    source: str
    values: dict[str, Any] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _loader() -> Any:
    """LMCacheEngineConfig, imported quietly (its import logs torch/GPU probing at INFO/WARNING)."""
    os.environ.setdefault("LMCACHE_LOG_LEVEL", "ERROR")
    try:
        from lmcache.v1.config import LMCacheEngineConfig
    except ImportError as exc:
        raise UserError(f"LMCache is not importable ({exc}); {INSTALL_HINT}") from None
    return LMCacheEngineConfig


@contextmanager
def _captured_lmcache_logs() -> Iterator[_Capture]:
    """Route every lmcache.* logger's warnings to one capture (its loggers do not propagate)."""
    capture = _Capture()
    saved: list[tuple[logging.Logger, list[logging.Handler], int]] = []
    for name in list(logging.root.manager.loggerDict):
        logger = logging.getLogger(name)
        if name.startswith("lmcache"):
            saved.append((logger, list(logger.handlers), logger.level))
            logger.handlers = [capture]
            logger.setLevel(logging.WARNING)
    # LMCACHE_* variables would override the file in a real engine, not in this check: hide them.
    hidden = {
        k: os.environ.pop(k)
        for k in list(os.environ)
        if k.startswith("LMCACHE_") and k != "LMCACHE_LOG_LEVEL"
    }
    try:
        yield capture
    finally:
        os.environ.update(hidden)
        for logger, handlers, level in saved:
            logger.handlers = handlers
            logger.setLevel(level)


def check_file(path: Path, source: str | None = None) -> ConfigCheck:
    """Load one LMCache YAML file with LMCache's loader and validator; warnings and errors are findings."""
    engine_config = _loader()
    result = ConfigCheck(source or str(path))
    with _captured_lmcache_logs() as capture:
        try:
            config = engine_config.from_file(str(path))
            validate = getattr(config, "validate", None)
            if callable(validate):
                validate()
        except Exception as exc:  # LMCache raises ValueError/TypeError/yaml errors for bad values
            result.findings.append(f"LMCache refused the config: {type(exc).__name__}: {exc}")
            return result
    result.findings.extend(f"LMCache warned: {message}" for message in capture.messages)
    result.values = {name: getattr(config, name) for name in getattr(config, "_user_set_keys", set())}
    return result


def inspect_text(text: str, source: str = "lmcache.yaml") -> ConfigCheck:
    """Load config text (e.g. the `lmcache.yaml` key of a rendered ConfigMap); `source` names it."""
    with tempfile.TemporaryDirectory(prefix="kvtier-lmcache-") as tmp:
        path = Path(tmp) / "lmcache.yaml"
        path.write_text(text)
        result = check_file(path, source)
    result.findings = [f.replace(str(path), source) for f in result.findings]
    return result


def check_text(text: str, source: str = "lmcache.yaml") -> list[str]:
    """The problems LMCache's loader has with config text; empty when it loads cleanly."""
    return inspect_text(text, source).findings
