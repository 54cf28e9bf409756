"""The Artifact Hub annotations of each chart's Chart.yaml that have a single source, written in place:

- `artifacthub.io/images`: every image of the chart's default render (hooks, `helm test` pods and
  subcharts included), from kvtier.images;
- `artifacthub.io/changes`: the entries of CHANGELOG.md's section for the chart's version, as
  kvtier.publish.changelog reads them.

Only these two keys' blocks are replaced; every other line of Chart.yaml stays as written.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import yaml

from kvtier import paths
from kvtier.errors import UserError
from kvtier.images import listing
from kvtier.publish import changelog

IMAGES_KEY = "artifacthub.io/images"
CHANGES_KEY = "artifacthub.io/changes"


def _scalar(value: str) -> str:
    """`value` as a YAML scalar: plain where YAML reads it back unchanged, else double-quoted."""
    try:
        plain = yaml.safe_load(f"k: {value}") == {"k": value}
    except yaml.YAMLError:
        plain = False
    return value if plain else json.dumps(value, ensure_ascii=False)


def images_yaml(chart: Path) -> str:
    """The images annotation's document: one item per image reference of the default render, named
    after its repository's last element (with the tag where two share one)."""
    # Without the schema: the chart's own defaults are what it validates against, and `generate --check`
    # must judge this file even while values.schema.json (generated before it) is stale.
    images = listing.release_images(chart, overlay=["--skip-schema-validation"])
    last = [i.reference.repository.rsplit("/", 1)[-1] for i in images]
    lines = []
    for image, name in zip(images, last, strict=True):
        if last.count(name) > 1:
            name = f"{name}-{image.reference.tag or image.reference.digest.split(':')[-1][:12]}"
        lines += [f"- name: {_scalar(name)}", f"  image: {_scalar(image.image)}"]
    return "\n".join(lines) + "\n"


def changes_yaml(chart: Path) -> str:
    """The changes annotation's document: CHANGELOG.md's entries for the chart's version, in order."""
    lines = []
    for kind, description in changelog.current_entries(chart):
        lines += [f"- kind: {kind}", f"  description: {json.dumps(description, ensure_ascii=False)}"]
    return "\n".join(lines) + "\n" if lines else "[]\n"


def _replace_block(text: str, key: str, document: str, where: Path) -> str:
    """Chart.yaml `text` with annotation `key` set to the literal block `document`; the key's old block
    (its line and every following blank or deeper-indented line) is replaced, or the key is added at the
    end of `annotations:`."""
    lines = text.splitlines()
    key_at = next((n for n, line in enumerate(lines) if re.match(rf"\s+{re.escape(key)}\s*:", line)), None)
    if key_at is None:
        start = next((n for n, line in enumerate(lines) if re.match(r"annotations\s*:\s*$", line)), None)
        if start is None:
            raise UserError(f"{where}: no top-level `annotations:` mapping to write {key} into")
        indent = "  "
        end = start + 1
        while end < len(lines) and (lines[end].startswith(" ") or not lines[end].strip()):
            end += 1
        while end > start + 1 and not lines[end - 1].strip():
            end -= 1  # blank lines after the mapping stay after it
        key_at = end
    else:
        indent = lines[key_at][: len(lines[key_at]) - len(lines[key_at].lstrip())]
        end = key_at + 1
        while end < len(lines) and (not lines[end].strip() or lines[end].startswith(indent + " ")):
            end += 1
        while end > key_at + 1 and not lines[end - 1].strip():
            end -= 1
    block = [f"{indent}{key}: |", *(f"{indent}  {line}" for line in document.splitlines())]
    return "\n".join(lines[:key_at] + block + lines[end:]) + "\n"


def chart_yaml(chart: Path) -> str:
    """The chart's Chart.yaml with both generated annotations as their sources have them."""
    where = chart / "Chart.yaml"
    text = where.read_text()
    text = _replace_block(text, IMAGES_KEY, images_yaml(chart), where)
    return _replace_block(text, CHANGES_KEY, changes_yaml(chart), where)


def expected(charts: Path = paths.CHARTS) -> Iterator[tuple[Path, str]]:
    """Each chart's Chart.yaml with the content it must have (charts under `charts`)."""
    for chart in sorted(p.parent for p in charts.glob("*/Chart.yaml")):
        yield chart / "Chart.yaml", chart_yaml(chart)
