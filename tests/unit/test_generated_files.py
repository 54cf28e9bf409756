"""Generated files (charts' values.schema.json, pod script copies) match their single sources."""

from __future__ import annotations

import json

from kvtier import paths, schema
from kvtier.generate import derived


def test_no_generated_file_is_stale() -> None:
    stale = [str(p.relative_to(paths.ROOT)) for p in derived.stale()]
    assert not stale, f"run `kvtier generate`; stale: {stale}"


def test_bundle_inlines_file_references_and_keeps_siblings(tmp_path) -> None:
    (tmp_path / "common.defs.json").write_text(
        json.dumps({"$defs": {"port": {"type": "integer", "minimum": 1, "maximum": 65535}}})
    )
    (tmp_path / "sub.values.schema.json").write_text(
        json.dumps(
            {"$schema": "x", "type": "object", "properties": {"p": {"$ref": "common.defs.json#/$defs/port"}}}
        )
    )
    source = tmp_path / "top.values.schema.json"
    source.write_text(
        json.dumps(
            {
                "type": "object",
                "properties": {
                    "sub": {"$ref": "sub.values.schema.json", "description": "the subchart"},
                    "local": {"$ref": "#/$defs/x"},
                },
            }
        )
    )
    bundled = schema.bundle(source)
    sub = bundled["properties"]["sub"]
    assert "$schema" not in sub
    assert sub["description"] == "the subchart"
    assert sub["properties"]["p"] == {"type": "integer", "minimum": 1, "maximum": 65535}
    assert bundled["properties"]["local"] == {"$ref": "#/$defs/x"}, "in-document refs stay"


def test_circular_file_reference_is_refused(tmp_path) -> None:
    import pytest

    (tmp_path / "a.values.schema.json").write_text(json.dumps({"$ref": "b.json"}))
    (tmp_path / "b.json").write_text(json.dumps({"$ref": "a.values.schema.json"}))
    with pytest.raises(ValueError, match="circular"):
        schema.bundle(tmp_path / "a.values.schema.json")
