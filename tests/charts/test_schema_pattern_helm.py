"""`kvtier validate` judges a schema `pattern` as the real Helm does (kvtier.validate.layers.schema_pattern):
the oracle is `helm template` of the pinned Helm 3 and Helm 4 on charts/curvine, whose schema has the two
patterns with \\s (config.blockSize, worker.dataDirs[].path), given each value in a values file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from render import helm_bin, render

from kvtier import helmyaml, paths
from kvtier.validate.inputs import loader
from kvtier.validate.layers import schema_check

CURVINE = paths.SCHEMA / "curvine.values.schema.json"
# What Python's re and Go's regexp read differently: Unicode spaces and digits, \v, a final newline.
ODD = ["\u00a0", "\u2003", "\u0085", "\u2028", "\v", "\n", "\u0664", "\t", " "]


def _override(key: str, text: str) -> dict[str, Any]:
    if key == "blockSize":
        return {"config": {"blockSize": text}}
    return {"worker": {"dataDirs": [{"path": text, "type": "SSD"}]}}


def _verdicts(key: str, text: str, folder: Path, major: int) -> tuple[bool, bool]:
    """(kvtier refuses, Helm refuses) for the value as a values file gives it to both."""
    file = folder / "override.yaml"
    file.write_text(helmyaml.dump(_override(key, text)))
    read = loader.load(file).data
    where = ["config", "blockSize"] if key == "blockSize" else ["worker", "dataDirs", 0, "path"]
    ours = any(list(e.absolute_path) == where for e in schema_check.validator(CURVINE).iter_errors(read))
    helm = render("curvine", values=[file], major=major)
    # Helm checks the schema before it renders: a later template error still means the schema took it.
    theirs = helm.returncode != 0 and "does not match pattern" in helm.stderr
    return ours, theirs


@pytest.fixture(scope="module", params=[3, 4], ids=["helm3", "helm4"])
def major(request: pytest.FixtureRequest, need) -> int:
    need(helm_bin(request.param).exists(), f"pinned Helm {request.param} not built (make tools)")
    return request.param


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("blockSize", "4 MB"),
        ("blockSize", "4\u00a0MB"),
        ("blockSize", "4MB\n"),
        ("blockSize", "\u0664MB"),
        ("path", "/mnt/nvme\u00a0disk"),
        ("path", "/mnt/nvme disk"),
    ],
    ids=[
        "space",
        "no-break-space",
        "final-newline",
        "arabic-indic-digit",
        "path-no-break-space",
        "path-space",
    ],
)
def test_kvtier_and_helm_agree_on_the_patterns(key: str, text: str, major: int, tmp_path: Path) -> None:
    ours, theirs = _verdicts(key, text, tmp_path, major)
    assert ours == theirs, f"{text!r}: kvtier {'refuses' if ours else 'takes'}, Helm {major} the opposite"


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(
    key=st.sampled_from(["blockSize", "path"]),
    parts=st.lists(st.sampled_from(["4", "/mnt", "M", "B", "x", ".", *ODD]), min_size=1, max_size=5),
)
def test_random_values_get_helms_verdict(key: str, parts: list[str], major: int, tmp_path: Path) -> None:
    text = "".join(parts) if key == "blockSize" else "/" + "".join(parts)
    ours, theirs = _verdicts(key, text, tmp_path, major)
    assert ours == theirs, f"{text!r}: kvtier {'refuses' if ours else 'takes'}, Helm {major} the opposite"
