"""Object names stay within Kubernetes' limits for long release names, in every environment.

Helm truncates the base name to 63 characters, but suffixes added after that can push a name past
what the API server accepts (a CronJob's 52, a DNS label's 63), which fails only at install time. And a
name helper that cuts the whole name at 63 cuts off its suffix: at the longest release name (53) and the
longest model names (40) every model's engine, router and LMCache ConfigMap would share one name. The
helpers cut the prefix and append the suffix (`suffixedName` in both charts).
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from render import helm_bin, render, render_docs

from kvtier import paths

# The longest release name helm accepts is 53 characters.
LONG_RELEASE = "a-platform-team-release-name-that-is-very-long-ab-x53"
# The longest model names the schema accepts (40), equal up to their last character.
LONG_MODELS = ("a-model-name-at-the-schema-limit-of-40-a", "a-model-name-at-the-schema-limit-of-40-b")
SHORT_RELEASE, SHORT_MODELS = "rel0", ("mod0a", "mod0b")
# kind -> longest name the API server (or the controller that derives names from it) accepts;
# other kinds take a DNS subdomain (253)
LIMITS = {
    "CronJob": 52,  # the controller appends an 11-character job suffix
    "StatefulSet": 52,  # pods get a controller-revision-hash label of name + hash (<= 63)
    "Service": 63,  # a DNS label
    "Job": 63,  # its pods carry the name as a label value
}
DNS_SUBDOMAIN = 253
LABEL_VALUE = 63
ENVIRONMENTS = [None, *sorted(p.name for p in paths.VALUES.glob("*.yaml"))]
UMBRELLA = paths.CHARTS / "kv-tiered-inference"
SOURCE = "# Source: "  # how `helm template` names each document's template


def test_the_long_names_are_at_their_limits() -> None:
    assert len(LONG_RELEASE) == 53
    assert all(len(m) == 40 for m in LONG_MODELS)


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_names_fit_the_api_server_limits_with_a_long_release_name(env: str | None, need) -> None:
    need(helm_bin(3).exists(), "pinned Helm 3 not built (make tools)")
    values = [paths.VALUES / env] if env else []
    docs = render_docs("kv-tiered-inference", values=values, release=LONG_RELEASE)
    too_long = [
        f"{doc['kind']}/{doc['metadata']['name']} ({len(doc['metadata']['name'])} > {LIMITS[doc['kind']]})"
        for doc in docs
        if doc.get("kind") in LIMITS and len(doc["metadata"]["name"]) > LIMITS[doc["kind"]]
    ]
    assert docs, "nothing rendered"
    assert not too_long, too_long


def _models_file(env: str | None, names: tuple[str, ...], directory: Path) -> Path:
    """A values file that gives the environment's first model under each of `names` (lists replace)."""
    sources = [UMBRELLA / "values.yaml", *([paths.VALUES / env] if env else [])]
    models = [yaml.safe_load(s.read_text()).get("models") for s in sources]
    first = [m for m in models if m][-1][0]
    out = {"models": [{**copy.deepcopy(first), "name": name} for name in names]}
    path = directory / f"models-{names[0]}.yaml"
    path.write_text(yaml.safe_dump(out))
    return path


def _sourced(stdout: str) -> dict[tuple[str, str, str, int], dict[str, Any]]:
    """Rendered objects keyed by (template, kind, model label, occurrence): the same key in two renders
    that differ only in release and model names is the same object."""
    out: dict[tuple[str, str, str, int], dict[str, Any]] = {}
    seen: Counter[tuple[str, str, str]] = Counter()
    for chunk in stdout.split("\n---\n"):
        sources = [line.removeprefix(SOURCE) for line in chunk.splitlines() if line.startswith(SOURCE)]
        source = sources[0] if sources else ""
        doc = yaml.safe_load(chunk)
        if not isinstance(doc, dict) or "kind" not in doc:
            continue
        labels = doc["metadata"].get("labels") or {}
        model = str(labels.get("kv-tiered-inference/model", ""))
        for names in (SHORT_MODELS, LONG_MODELS):
            model = str(names.index(model)) if model in names else model
        base = (source, doc["kind"], model)
        seen[base] += 1
        out[(*base, seen[base])] = doc
    return out


def _render(env: str | None, release: str, models: tuple[str, ...], tmp: Path, extra: dict[str, Any]) -> str:
    values = [*([paths.VALUES / env] if env else []), _models_file(env, models, tmp)]
    result = render("kv-tiered-inference", values=values, release=release, set_values=extra)
    assert result.returncode == 0, f"helm template failed:\n{result.stderr}"
    return result.stdout


def _tail(name: str) -> str:
    """What follows the release-derived part of a short-render name, with the long model names in."""
    tokens = (f"{SHORT_RELEASE}-kv-tiered-inference", f"{SHORT_RELEASE}-curvine", SHORT_RELEASE)
    ends = [name.rfind(t) + len(t) for t in tokens if t in name]
    tail = name[max(ends) :] if ends else name
    for short, long in zip(SHORT_MODELS, LONG_MODELS, strict=True):
        tail = re.sub(rf"(?<![a-z0-9]){short}(?![a-z0-9])", long, tail)
    return tail


def _label_values(doc: dict[str, Any]) -> dict[str, str]:
    """The object's labels, its selector's matchLabels and its pod template's labels."""
    spec = doc.get("spec") or {}
    selector = spec.get("selector") if isinstance(spec.get("selector"), dict) else {}
    found = {**(doc["metadata"].get("labels") or {}), **(selector.get("matchLabels") or {})}
    found |= ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    return {k: str(v) for k, v in found.items()}


@pytest.mark.parametrize("env", [*ENVIRONMENTS, "kvaware"])
def test_long_names_keep_their_suffixes_stay_distinct_and_fit(env: str, tmp_path: Path, need) -> None:
    """At the 63-character limit (53-character release, 40-character models): each object name fits its
    kind's limit and every label value fits 63, no two objects of a kind share a name, and each name
    ends as it does at short names (its model and its suffix kept; only the release part is cut)."""
    need(helm_bin(3).exists(), "pinned Helm 3 not built (make tools)")
    environment = None if env in (None, "kvaware") else env
    extra = {"routing.strategy": "kvaware"} if env == "kvaware" else {}  # the engines become StatefulSets
    short = _sourced(_render(environment, SHORT_RELEASE, SHORT_MODELS, tmp_path, extra))
    long = _sourced(_render(environment, LONG_RELEASE, LONG_MODELS, tmp_path, extra))
    assert short and short.keys() == long.keys(), "the two renders hold different objects"

    too_long, lost_suffix, long_labels = [], [], []
    for key, doc in long.items():
        kind, name = doc["kind"], doc["metadata"]["name"]
        limit, tail = LIMITS.get(kind, DNS_SUBDOMAIN), _tail(short[key]["metadata"]["name"])
        if len(name) > limit:
            too_long.append(f"{kind}/{name} ({len(name)} > {limit})")
        if not name.endswith(tail):
            lost_suffix.append(f"{kind}/{name}: expected to end with {tail}")
        long_labels += [f"{kind}/{name}: {k}" for k, v in _label_values(doc).items() if len(v) > LABEL_VALUE]
    names = Counter((d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in long.values())
    assert not too_long, too_long
    assert not lost_suffix, lost_suffix
    assert not long_labels, long_labels
    assert [n for n, count in names.items() if count > 1] == []
