"""Every integer the charts render stays an integer at seven digits.

Helm holds every number of the values as a float64, and a template that prints one as it is writes
`1.2096e+06` from a million up (Go's %v): a CronJob argument that the eviction script reads with
int() fails, and an API field of int32 gets an exponent. The test walks the umbrella schema (Curvine's
values included) for every integer key whose bounds allow 1,234,567, sets it alone over
values/staging.yaml and renders with the pinned Helm 3: no rendered line may carry the exponent form.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from render import helm_bin, render_one_key

from kvtier import helm, helmyaml, paths
from kvtier import schema as schema_source

BIG = 1234567
EXPONENT_FORM = "1.234567e+06"
BASE = paths.VALUES / "staging.yaml"


def integer_keys(node: Any, at: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Key paths (outside lists) of integers that may be BIG."""
    if not isinstance(node, dict):
        return
    kinds = node.get("type")
    integer = kinds == "integer" or (isinstance(kinds, list) and "integer" in kinds)
    if integer and node.get("minimum", 0) <= BIG <= node.get("maximum", BIG):
        yield at
    for name, sub in (node.get("properties") or {}).items():
        yield from integer_keys(sub, (*at, name))
    for branch in ("anyOf", "oneOf", "allOf"):
        for sub in node.get(branch) or []:
            yield from integer_keys(sub, at)


def test_no_integer_renders_in_exponent_form(need, tmp_path: Path) -> None:
    need(helm_bin(3).exists(), "pinned Helm 3 not built: run `make tools`")
    umbrella = schema_source.bundle(paths.SCHEMA / "kv-tiered-inference.values.schema.json")
    keys = sorted(set(integer_keys(umbrella)))
    assert len(keys) > 60, "the schema walk lost its reach"
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(
            zip(keys, pool.map(lambda k: render_one_key(k, BIG, BASE, tmp_path), keys), strict=True)
        )
    rendered = {k: r.stdout for k, r in results.items() if r.returncode == 0}
    # a key the chart refuses at this size (a cross-field check) says nothing about formatting
    assert len(rendered) >= 0.8 * len(keys), {".".join(k): r.stderr[-200:] for k, r in results.items()}
    exponent = {
        ".".join(k): [line.strip() for line in text.splitlines() if EXPONENT_FORM in line][:2]
        for k, text in rendered.items()
        if EXPONENT_FORM in text
    }
    assert exponent == {}, exponent
    assert any(str(BIG) in text for text in rendered.values())


@pytest.mark.parametrize(("given", "printed"), [("25%", 'maxUnavailable: "25%"'), (3, "maxUnavailable: 3")])
def test_an_int_or_string_keeps_its_kind(need, tmp_path: Path, given: Any, printed: str) -> None:
    need(helm_bin(3).exists(), "pinned Helm 3 not built: run `make tools`")
    file = tmp_path / "over.yaml"
    file.write_text(helmyaml.dump({"curvine": {"worker": {"maxUnavailable": given}}}))
    chart = paths.CHARTS / "kv-tiered-inference"
    result = helm.run(["template", "x", str(chart), "-f", str(BASE), "-f", str(file)], major=3, timeout=120)
    assert result.returncode == 0, result.stderr
    assert printed in result.stdout
