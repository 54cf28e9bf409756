"""Files derived from a single source, written by `kvtier generate` and checked for drift in tests.

- charts/<chart>/values.schema.json from schema/<chart>.values.schema.json (kvtier.schema);
- charts/kv-tiered-inference/files/podscripts/*.py from tools/kvtier/podscripts/ (Helm can only
  read files inside a chart, and the pods run these scripts from a ConfigMap);
- charts/<chart>/README.md from README.md.gotmpl + values.yaml `# --` comments (kvtier.readme, helm-docs).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from kvtier import paths, readme, schema

PODSCRIPTS_SOURCE = Path(__file__).parent / "podscripts"
PODSCRIPTS_CHARTS = ("kv-tiered-inference",)


def expected() -> Iterator[tuple[Path, str]]:
    """Every generated file with the content it must have."""
    for chart, source in schema.chart_sources().items():
        yield paths.CHARTS / chart / "values.schema.json", schema.render(schema.bundle(source))
    scripts = sorted(p for p in PODSCRIPTS_SOURCE.glob("*.py") if p.name != "__init__.py")
    for chart in PODSCRIPTS_CHARTS:
        for script in scripts:
            yield paths.CHARTS / chart / "files" / "podscripts" / script.name, script.read_text()
    # README values tables (publishing): rendered in a temp dir, so --check writes nothing.
    yield from readme.expected()


def stale() -> list[Path]:
    return [path for path, text in expected() if not path.exists() or path.read_text() != text]


def write() -> list[Path]:
    written = []
    for path, text in expected():
        if not path.exists() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            written.append(path)
    return written
