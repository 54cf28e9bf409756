"""What the plugin asks of one `helm template` run, and what comes back (shared by render and batch)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class RenderRequest:
    chart_dir: Path
    target_route: str
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    overrides: tuple[tuple[str, str], ...]
    release_name: str
    namespace: str
    revision: int
    upgrade: bool
    kube_major: str
    kube_minor: str
    api_versions: tuple[str, ...]
    values_yaml: str
    lookup_define: str = ""  # the `kvtier.lookup` template serving kubernetesProvider; "" for Helm's own


@dataclass
class RenderResult:
    files: dict[str, str] = field(default_factory=dict)  # template name -> raw output
    error: str | None = None  # Helm's error text (without "Error: ") when rendering failed
