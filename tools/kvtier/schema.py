"""The single schema source: schema/<chart>.values.schema.json (+ shared files it references).

Sources may reference other files in schema/ (`{"$ref": "common.defs.json#/$defs/image"}`); each
chart's values.schema.json is the source with every such file reference inlined, because Helm
validates a chart's values against that one file. A test fails when a chart's copy drifts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvtier import paths

SUFFIX = ".values.schema.json"


def chart_sources(schema_dir: Path = paths.SCHEMA) -> dict[str, Path]:
    """Chart name -> its schema source file."""
    return {p.name.removesuffix(SUFFIX): p for p in sorted(schema_dir.glob(f"*{SUFFIX}"))}


def _pointer(document: Any, pointer: str) -> Any:
    node = document
    for part in [p for p in pointer.split("/") if p]:
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def bundle(source: Path) -> dict[str, Any]:
    """The source schema with every reference to another schema file inlined.

    Nothing is mutated: each inlined node is built anew, so one file target can appear in several
    places of the output. Paths resolve and targets inline once per bundle (the sources hold ~100
    file references; resolving each one again costs a filesystem walk)."""
    documents: dict[Path, Any] = {}
    locations: dict[tuple[Path, str], Path] = {}
    inlined: dict[str, Any] = {}

    def load(path: Path) -> Any:
        if path not in documents:
            documents[path] = json.loads(path.read_text())
        return documents[path]

    def locate(base: Path, file_part: str) -> Path:
        key = (base.parent, file_part)
        if key not in locations:
            locations[key] = (base.parent / file_part).resolve()
        return locations[key]

    def inline(node: Any, base: Path, seen: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [inline(item, base, seen) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and not ref.startswith("#"):
            file_part, _, pointer = ref.partition("#")
            target_path = locate(base, file_part)
            key = f"{target_path}#{pointer}"
            if key in seen:
                raise ValueError(f"circular $ref {ref} in {base}")
            if key not in inlined:
                target = _pointer(load(target_path), pointer)
                if isinstance(target, dict):
                    target = {k: v for k, v in target.items() if k not in ("$schema", "$id")}
                inlined[key] = inline(target, target_path, (*seen, key))
            siblings = {k: inline(v, base, seen) for k, v in node.items() if k != "$ref"}
            return {**inlined[key], **siblings}
        return {k: inline(v, base, seen) for k, v in node.items()}

    return inline(load(source), source, ())


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
