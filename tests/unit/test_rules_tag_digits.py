r"""The rules that read a release out of an image tag read ASCII digits only. Python's \d matches every
script's digits (a tag "v0.4.7" in Arabic-Indic digits was read as 0.4.7); a tag holds none of them
(distribution/reference, the kubelet's grammar: kvtier.images.reference), so such a tag names no release,
and image-reference-parses refuses it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from kvtier.validate import catalogue
from kvtier.validate.findings import Finding
from kvtier.validate.inputs import loader
from kvtier.validate.rules import ValuesContext

GOOD = loader.load(Path(__file__).parents[1] / "fixtures" / "values" / "good-minimal.yaml").data
ARABIC_INDIC = str.maketrans("0123456789", "".join(chr(0x660 + d) for d in range(10)))


def run(rule_id: str, values: dict[str, Any]) -> list[Finding]:
    loaded = loader.load_text(yaml.safe_dump(values, allow_unicode=True), Path("env.yaml"))
    return catalogue.run_values(ValuesContext(values, loaded), only=[rule_id])


def test_a_tag_in_other_digits_names_no_lmcache_release() -> None:
    values = copy.deepcopy(GOOD)
    tag = "0.31.9-lmcache" + "0.4.2".translate(ARABIC_INDIC)
    values["engine"] = {"image": {"repository": "kvtier/vllm-cpu-lmcache", "tag": tag}}
    [finding] = run("lmcache-version-matches-image", values)
    assert finding.severity == "warning" and "names no LMCache release" in finding.message, finding.message


def test_a_worker_tag_in_other_digits_is_not_read_as_an_old_lmcache() -> None:
    values = copy.deepcopy(GOOD)
    values["target"] = "hyperpod"
    values["hyperpod"] = {
        "operator": {"version": "3.7"},
        "lmcache": {"mode": "MultiProcess"},
        "worker": {"image": {"tag": "v0.4.7".translate(ARABIC_INDIC)}},
    }
    assert run("hyperpod-multiprocess-lmcache", values) == []
    values["hyperpod"]["worker"]["image"]["tag"] = "v0.4.7"  # the same tag in ASCII digits is judged
    assert [f.severity for f in run("hyperpod-multiprocess-lmcache", values)] == ["error"]
