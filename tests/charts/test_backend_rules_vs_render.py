"""The validator's cache-backend rules against the chart itself: over every combination of target, backend,
hash algorithm, L1 and hit recording, `helm template` (the pinned Helm 3) refuses the values exactly when
`kvtier validate`'s backend rules report an error, so a user never meets a refusal the validator did not
announce, nor a finding the chart would have rendered anyway."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml
from render import helm_bin, render

from kvtier import paths
from kvtier.validate import catalogue, loader, merge
from kvtier.validate.rules import ValuesContext

BASES = {
    "standalone": paths.VALUES / "prod-g6e-4xlarge.yaml",
    "hyperpod": paths.VALUES / "hyperpod-g6e-4xlarge.yaml",
}
BACKEND_RULES = [rule for rule in catalogue.all_rules() if rule.startswith("backend-")]
# What backendCheck's refusals start with (templates/_cache.tpl).
REFUSALS = ("cache.backend vllm-native:", "cache.l2.eviction.recordHits:", "cache.hashAlgorithm ")
COMBINATIONS = list(
    itertools.product(
        BASES, ("lmcache", "vllm-native"), ("builtin", "sha256", "xxhash"), (True, False), (True, False)
    )
)


@pytest.fixture(autouse=True)
def _helm(need) -> None:
    need(helm_bin(3).exists(), "pinned Helm not built: run `make tools`")


def _overlay(backend: str, algorithm: str, l1: bool, record_hits: bool) -> dict[str, Any]:
    return {
        "cache": {
            "backend": backend,
            "hashAlgorithm": algorithm,
            "l1": {"enabled": l1},
            "l2": {"eviction": {"recordHits": record_hits}},
        }
    }


@pytest.mark.parametrize(("target", "backend", "algorithm", "l1", "record_hits"), COMBINATIONS)
def test_the_chart_refuses_exactly_what_the_backend_rules_report(
    tmp_path: Path, target: str, backend: str, algorithm: str, l1: bool, record_hits: bool
) -> None:
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(yaml.safe_dump(_overlay(backend, algorithm, l1, record_hits)))
    result = render("kv-tiered-inference", values=[BASES[target], overlay])
    refused = result.returncode != 0
    if refused:
        assert any(word in result.stderr for word in REFUSALS), result.stderr[-1500:]
    values = merge.effective(loader.load(BASES[target]).data)
    values = merge.coalesce(values, _overlay(backend, algorithm, l1, record_hits))
    loaded = loader.load_text(yaml.safe_dump(values), overlay)
    findings = catalogue.run_values(ValuesContext(values, loaded), only=BACKEND_RULES)
    errors = [f"{f.rule}: {f.message}" for f in findings if f.severity == "error"]
    assert refused == bool(errors), f"helm: {result.stderr.strip()[-400:] or 'rendered'}; validate: {errors}"
