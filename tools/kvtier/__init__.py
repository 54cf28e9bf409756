"""kvtier: the toolkit of the tiered KV-cache inference bundle."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    # Looked up on demand: importlib.metadata costs ~40 ms of every run's start, and only
    # `kvtier --version` needs it.
    if name != "__version__":
        raise AttributeError(f"module 'kvtier' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kvtier")
    except PackageNotFoundError:  # running from a source tree without installation
        return "0.0.0+source"
