"""Files derived from a single source, written by `kvtier generate` and checked for drift in tests.

- charts/<chart>/values.schema.json from schema/<chart>.values.schema.json (kvtier.schema);
- charts/kv-tiered-inference/files/podscripts/*.py from tools/kvtier/podscripts/ (Helm can only
  read files inside a chart, and the pods run these scripts from a ConfigMap);
- charts/<chart>/README.md from README.md.gotmpl + values.yaml `# --` comments
  (kvtier.generate.readme, helm-docs);
- the rule catalogue in docs/validate.md, between its markers, from the rule registry;
- the `artifacthub.io/images` and `artifacthub.io/changes` annotations of charts/<chart>/Chart.yaml
  from the default render and CHANGELOG.md (kvtier.generate.artifacthub).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from kvtier import paths, schema
from kvtier.errors import UserError
from kvtier.generate import artifacthub, readme

PODSCRIPTS_SOURCE = Path(__file__).parents[1] / "podscripts"
PODSCRIPTS_CHARTS = ("kv-tiered-inference",)
RULES_DOC = paths.ROOT / "docs" / "validate.md"
RULES_BEGIN = "<!-- rule catalogue: written by `kvtier generate` from the rule registry; do not edit -->"
RULES_END = "<!-- end of rule catalogue -->"


def _rules_doc() -> str:
    """docs/validate.md with its rule catalogue as the registry has it."""
    from kvtier.validate import catalogue

    text = RULES_DOC.read_text()
    head, begin, rest = text.partition(RULES_BEGIN)
    _, end, tail = rest.partition(RULES_END)
    if not begin or not end:
        raise UserError(f"{RULES_DOC}: the markers {RULES_BEGIN!r} and {RULES_END!r} are missing")
    return f"{head}{RULES_BEGIN}\n\n{catalogue.markdown()}\n{RULES_END}{tail}"


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
    yield RULES_DOC, _rules_doc()
    yield from artifacthub.expected()


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
