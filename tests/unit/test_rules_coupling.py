"""The coupling rules (coupling_rules.py): the engine image's LMCache release against cache.lmcacheVersion,
the cross-pod test prompt against the chunk size, and rendered images against the kubelet's reference grammar.

Oracles: the chart's own render (what the kubelet is given), distribution's grammar as kvtier.images.reference
reads it, and, for the prompt, the token bounds that tests/engine/test_crosspod_prompt_chunk.py measures with
real tokenizers and LMCache's own store."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvtier import paths
from kvtier.validate import catalogue, pipeline
from kvtier.validate.checks import coupling_rules
from kvtier.validate.findings import Finding
from kvtier.validate.inputs import loader, merge
from kvtier.validate.rules import ManifestsContext, ValuesContext

FIXTURES = Path(__file__).parents[1] / "fixtures" / "values"
GOOD = loader.load(FIXTURES / "good-minimal.yaml").data
LMCACHE_RULE, PROMPT_RULE, IMAGE_RULE = (
    "lmcache-version-matches-image",
    "test-prompt-covers-a-chunk",
    "image-reference-parses",
)
DEFAULT_LMCACHE = str(merge.umbrella().defaults["cache"]["lmcacheVersion"])


def run(rule_id: str, values: dict[str, Any]) -> list[Finding]:
    loaded = loader.load_text(yaml.safe_dump(values), Path("env.yaml"))
    return catalogue.run_values(ValuesContext(values, loaded), only=[rule_id])


def good(**top: Any) -> dict[str, Any]:
    values = copy.deepcopy(GOOD)
    values.update(copy.deepcopy(top))
    return values


# --- lmcache-version-matches-image ---------------------------------------------------------------------


def test_the_charts_default_image_and_version_agree() -> None:
    assert run(LMCACHE_RULE, good()) == []


def test_a_tag_naming_another_lmcache_release_is_refused_at_the_tag() -> None:
    image = {"repository": "kvtier/vllm-cpu-lmcache", "tag": "0.31.9-lmcache0.4.2"}
    [finding] = run(LMCACHE_RULE, good(engine={"image": image}))
    assert (finding.severity, finding.path) == ("error", "engine.image.tag")
    assert f"is LMCache 0.4.2, but cache.lmcacheVersion is {DEFAULT_LMCACHE}" in finding.message
    # The same tag with the version declared to match: nothing to say.
    assert run(LMCACHE_RULE, good(engine={"image": image}, cache={"lmcacheVersion": "0.4.2"})) == []


def test_lmcaches_own_image_is_tagged_with_its_release() -> None:
    own = {"repository": "lmcache/vllm-openai", "tag": "v0.5.6"}
    [finding] = run(LMCACHE_RULE, good(engine={"image": own}, cache={"lmcacheVersion": "0.4.9"}))
    assert finding.severity == "error" and "is LMCache 0.5.6" in finding.message
    # Another project's image tagged v0.5.6 names its own release, not LMCache's: only unknowable.
    other = {"repository": "example/vllm", "tag": "v0.5.6"}
    [unknown] = run(LMCACHE_RULE, good(engine={"image": other}))
    assert unknown.severity == "warning" and "names no LMCache release" in unknown.message


def test_a_tag_that_names_no_release_is_a_warning_naming_what_decides() -> None:
    nightly = {"repository": "lmcache/vllm-openai", "tag": "latest-nightly"}
    [finding] = run(LMCACHE_RULE, good(engine={"image": nightly}))
    assert (finding.severity, finding.path) == ("warning", "engine.image.tag")
    assert "`pip show lmcache`" in finding.message


def test_a_digest_makes_the_tags_release_a_claim_only() -> None:
    pinned = {"repository": "lmcache/vllm-openai", "tag": "v0.5.6", "digest": "sha256:" + "c" * 64}
    [finding] = run(LMCACHE_RULE, good(engine={"image": pinned}))
    assert finding.severity == "warning" and "engine.image.digest" in finding.message


def test_hyperpod_judges_the_worker_image_and_native_offloading_is_not_judged() -> None:
    worker = {"image": {"repository": "lmcache/vllm-openai", "tag": "v0.4.0"}}
    [finding] = run(LMCACHE_RULE, good(target="hyperpod", hyperpod={"worker": worker}))
    assert finding.path == "hyperpod.worker.image.tag" and finding.severity == "error"
    native = good(engine={"image": {"repository": "lmcache/vllm-openai", "tag": "v0.4.0"}})
    native["cache"]["backend"] = "vllm-native"
    assert run(LMCACHE_RULE, native) == []


# --- curvine-csi-node-on-engine-nodes ------------------------------------------------------------------


def _csi_selector(selector: dict[str, str], **more: Any) -> list[Finding]:
    values = good()
    values["curvine"]["csi"] = {"node": {"nodeSelector": selector}, **more}
    return run("curvine-csi-node-on-engine-nodes", values)


def test_a_node_plugin_kept_off_the_engines_instance_type_is_refused() -> None:
    findings = _csi_selector({"node.kubernetes.io/instance-type": "ml.g5.4xlarge"})
    assert findings and {(f.severity, f.path) for f in findings} == {
        ("error", "curvine.csi.node.nodeSelector.node.kubernetes.io/instance-type")
    }


def test_a_label_the_engines_do_not_require_is_a_warning_naming_it() -> None:
    findings = _csi_selector({"example.com/storage": "curvine"})
    assert findings and all(f.severity == "warning" for f in findings)
    assert "kubectl get nodes -L example.com/storage" in findings[0].message


def test_an_empty_selector_or_no_node_plugin_from_the_release_passes() -> None:
    assert _csi_selector({}) == []
    assert _csi_selector({"example.com/storage": "curvine"}, enabled=False) == []


# --- test-prompt-covers-a-chunk -------------------------------------------------------------------------


def _prompt(words: int, chunk: int = 256, **tests: Any) -> list[Finding]:
    values = good(tests={"crosspodWords": words, **tests})
    values["cache"]["chunkSize"] = chunk
    return run(PROMPT_RULE, values)


def _words_for(tokens: int, bound: int) -> int:
    """The fewest words whose prompt has at least `tokens` tokens at `bound` (0: fewest, 1: most)."""
    return next(n for n in range(1, 100_000) if coupling_rules.prompt_tokens(n)[bound] >= tokens)


@pytest.mark.parametrize("chunk", [256, 2048])
def test_the_verdict_follows_the_token_bounds(chunk: int) -> None:
    never = _words_for(chunk, 1) - 1  # even the most tokens these words can be is under one chunk
    maybe = _words_for(chunk, 0) - 1  # the fewest are under one chunk, the most are not
    always = _words_for(chunk, 0)
    assert never < maybe < always
    [error] = _prompt(never, chunk)
    assert error.severity == "error" and error.path == "tests.crosspodWords"
    [warning] = _prompt(maybe, chunk)
    assert warning.severity == "warning" and "the model's tokenizer decides" in warning.message
    assert _prompt(always, chunk) == []


def test_the_charts_default_prompt_spans_several_chunks() -> None:
    words = merge.umbrella().defaults["tests"]["crosspodWords"]
    assert coupling_rules.prompt_tokens(words)[0] >= 4 * merge.umbrella().defaults["cache"]["chunkSize"]
    assert _prompt(words) == []


def test_no_crosspod_test_no_finding() -> None:
    assert _prompt(10, enabled=False) == []
    one_replica = good(tests={"crosspodWords": 10})
    for model in one_replica["models"]:
        model["replicas"] = 1
    assert run(PROMPT_RULE, one_replica) == []
    no_l2 = good(tests={"crosspodWords": 10})
    no_l2["cache"]["l2"]["enabled"] = False
    assert run(PROMPT_RULE, no_l2) == []


# --- image-reference-parses -----------------------------------------------------------------------------


def _pod(image: str) -> ManifestsContext:
    container = {"name": "engine", "image": image}
    deployment = {
        "kind": "Deployment",
        "metadata": {"name": "engine"},
        "spec": {"template": {"spec": {"containers": [container]}}},
    }
    return ManifestsContext([deployment], "kv")


@pytest.mark.parametrize(
    ("image", "why"),
    [
        ("docker.io/LMCache/vllm-openai:v0.4.9", "must be lower case"),
        ("docker.io//lmcache/vllm-openai:v0.4.9", "is not path components"),
        ("docker.io/lmcache/vllm-openai:v0.5 rc1", "tag 'v0.5 rc1'"),
        ("docker.io/lmcache/vllm-openai@" + "d" * 64, "is not sha256:"),
    ],
)
def test_what_the_kubelet_cannot_parse_is_refused_once(image: str, why: str) -> None:
    found = catalogue.run_manifests(_pod(image), "env.yaml", only=[IMAGE_RULE, "image-no-latest"])
    assert [(f.rule, f.severity) for f in found] == [(IMAGE_RULE, "error")]
    assert why in found[0].message and "InvalidImageName" in found[0].message


@pytest.mark.parametrize(
    "image",
    ["localhost:5000/vllm:v1", "ghcr.io/org/team/x:v1", "registry.example/a/b:v1_rc.1-x", "python"],
)
def test_references_the_kubelet_parses_pass(image: str) -> None:
    assert catalogue.run_manifests(_pod(image), "env.yaml", only=[IMAGE_RULE]) == []


@pytest.mark.parametrize(
    ("image_values", "key"),
    [
        ({"repository": "kvtier/VLLM-cpu-lmcache"}, "engine.image.repository"),
        # A trailing "/" the chart drops itself (_images.tpl); a trailing blank it keeps.
        ({"registry": "docker.io "}, "engine.image.registry"),
    ],
)
def test_the_finding_points_at_the_users_key(tmp_path: Path, image_values: dict[str, str], key: str) -> None:
    overlay = tmp_path / "mine.yaml"
    overlay.write_text(yaml.safe_dump({"engine": {"image": image_values}}))
    options = pipeline.Options(helm_majors=(3,), minors=("1.35",), values=(overlay,))
    [report] = pipeline.validate([paths.VALUES / "cpu.yaml"], options)
    mine = [f for f in report.findings if f.rule == IMAGE_RULE]
    assert mine and all(f.severity == "error" and f.path == key for f in mine), mine
    leaf = key.rsplit(".", 1)[1]
    lines = overlay.read_text().splitlines()
    written = next(n for n, line in enumerate(lines, 1) if line.strip().startswith(f"{leaf}:"))
    assert all(f.file == str(overlay) and f.line == written for f in mine), mine
