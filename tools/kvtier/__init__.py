"""kvtier: the toolkit of the tiered KV-cache inference bundle."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kvtier")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+source"
