"""`kvtier validate` reads a model's config.json from the Hub at the pinned revision, as vLLM does
(kvtier.validate.hub_facts), before the local cache and the shipped facts: a model outside the shipped files
is judged as fully as a shipped one, a gated repository and a missing revision are told apart, an
unreachable Hub costs seconds, and where the facts came from is said when it was not the Hub. The Hub here is
a stand-in on loopback (tests/harness/hub_stand_in.py); each test has its own Hugging Face cache."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import hub_stand_in, model_configs
from harness.hub_stand_in import StandInHub, commit_of, go_offline, go_online, shipped_config
from kvtier import cli, paths
from kvtier.validate import catalogue, hub_facts, model_facts
from kvtier.validate.findings import Finding
from kvtier.validate.inputs import loader
from kvtier.validate.rules import ValuesContext

FIXTURES = Path(__file__).parents[1] / "fixtures" / "values"
GOOD = loader.load(FIXTURES / "good-minimal.yaml").data  # Qwen2-7B-Instruct on ml.g6e.4xlarge (one L40S)
QWEN = "Qwen/Qwen2-7B-Instruct"
QWEN_PIN = GOOD["models"][0]["source"]["huggingface"]["revision"]
# Not in the shipped facts: a repository id of this test's own, with a config the test makes, shaped as a
# 13B-class dense decoder (40 layers of 5120, 40 heads, 4096 positions, bfloat16).
UNSHIPPED = "kvtier-test/dense-13b"
UNSHIPPED_CONFIG = model_configs.DENSE_13B
UNSHIPPED_BYTES = model_configs.DENSE_13B_BYTES
TOKEN = "hf_stand_in_token"
SHAPE_RULES = ("max-model-len-within-model", "tp-divides-heads", "gpu-memory-holds-weights")
FIRING = ("max-model-len-within-model", "gpu-memory-holds-weights")  # on _unshipped() as it is


@pytest.fixture(autouse=True)
def _own_hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return hub_stand_in.own_hub_cache(tmp_path, monkeypatch)


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, _own_hub_cache: Path) -> Iterator[StandInHub]:
    """The stand-in, serving Qwen2-7B-Instruct (shipped facts, at the fixture's pinned commit) and the
    unshipped model; huggingface_hub pointed at it."""
    stand_in = StandInHub()
    stand_in.add(QWEN, shipped_config("qwen2-7b-instruct"), revisions={"pinned": QWEN_PIN})
    stand_in.add(UNSHIPPED, UNSHIPPED_CONFIG, total_size=UNSHIPPED_BYTES)
    stand_in.start()
    go_online(monkeypatch, stand_in, _own_hub_cache)
    yield stand_in
    stand_in.stop()


def _values(**model: Any) -> dict[str, Any]:
    values = copy.deepcopy(GOOD)
    values["models"][0].update(model)
    return values


def _unshipped(**model: Any) -> dict[str, Any]:
    """The unshipped model at 8192 tokens (twice its limit) on 0.4 of an L40S (weights of 24.2 GiB in less
    than 18 GiB): two shape rules have an error to find."""
    source = {"huggingface": {"tokenSecret": {"name": "hf-token", "key": "token"}}}
    settings = {"source": source, "maxModelLen": 8192, "gpuMemoryUtilization": 0.4}
    return _values(model=UNSHIPPED, **{**settings, **model})


def _run(values: dict[str, Any], *rule_ids: str) -> list[Finding]:
    loaded = loader.load_text(yaml.safe_dump(values, sort_keys=False), Path("env.yaml"))
    return catalogue.run_values(ValuesContext(loaded.data, loaded), only=list(rule_ids))


def _by_rule(findings: list[Finding]) -> dict[str, list[Finding]]:
    found: dict[str, list[Finding]] = {}
    for finding in findings:
        found.setdefault(finding.rule, []).append(finding)
    return found


# -- a model outside the shipped files ---------------------------------------------------------------------


def test_an_unshipped_model_is_judged_from_the_hub(hub: StandInHub) -> None:
    found = _by_rule(_run(_unshipped(), *SHAPE_RULES, "model-facts-source"))
    assert set(found) == set(FIRING), found  # and no model-facts-source line: the Hub gave the facts
    for rule_id in FIRING:
        assert [f.severity for f in found[rule_id]] == ["error"], found[rule_id]
    [context] = found["max-model-len-within-model"]
    main = commit_of(sorted(hub.repos[UNSHIPPED].files.items()))
    assert f"from {hub.url}/{UNSHIPPED}/resolve/{main}/config.json" in context.message
    [weights] = found["gpu-memory-holds-weights"]
    assert "take 24.2 GiB per GPU (over 1 GPU(s))" in weights.message  # the index's total_size
    [heads] = _run(_unshipped(gpusPerReplica=3), "tp-divides-heads")
    assert heads.severity == "error" and "does not divide kvtier-test/dense-13b's 40 attention heads" in (
        heads.message
    )
    facts = model_facts.find(_unshipped()["models"][0], {})
    assert facts is not None and facts.kind == "hub" and facts.weight_bytes == UNSHIPPED_BYTES
    asked = {(r.method, r.path.split("/resolve/")[1]) for r in hub.requests if UNSHIPPED in r.path}
    assert ("GET", "main/config.json") in asked and ("GET", "main/model.safetensors.index.json") in asked


def test_offline_the_same_model_is_unknown_and_said_so() -> None:
    found = _by_rule(_run(_unshipped(), *SHAPE_RULES, "model-facts-source"))
    assert set(found) == {"model-facts-source"}
    [line] = found["model-facts-source"]
    assert line.severity == "warning" and "HF_HUB_OFFLINE" in line.message
    assert "validate has no config.json for it" in line.message and "tp-divides-heads" in line.message


def test_the_cache_serves_a_second_run_offline(hub: StandInHub, monkeypatch: pytest.MonkeyPatch) -> None:
    pinned = _unshipped(source={"huggingface": {"revision": "main"}})
    online = model_facts.find(pinned["models"][0], {})
    assert online is not None and online.kind == "hub"
    hub.stop()
    go_offline(monkeypatch)
    model_facts._read_found.cache_clear()
    offline = model_facts.find(pinned["models"][0], {})
    assert offline is not None and offline.kind == "cache"
    assert offline.config == online.config and offline.weight_bytes == UNSHIPPED_BYTES
    found = _by_rule(_run(pinned, "max-model-len-within-model", "model-facts-source"))
    assert [f.severity for f in found["max-model-len-within-model"]] == ["error"]
    [line] = found["model-facts-source"]
    assert "from the local Hugging Face cache" in line.message and "HF_HUB_OFFLINE" in line.message


# -- what the Hub refuses ----------------------------------------------------------------------------------


def test_a_gated_repository_without_a_token_falls_through_and_says_so(hub: StandInHub) -> None:
    hub.repos[UNSHIPPED].token = TOKEN
    values = _unshipped(source={"huggingface": {"tokenSecret": {"name": "", "key": "token"}}})
    found = _by_rule(_run(values, *SHAPE_RULES, "model-facts-source", "gated-model-needs-token"))
    assert set(found) == {"model-facts-source", "gated-model-needs-token"}, found
    [line] = found["model-facts-source"]
    assert "401 GatedRepo" in line.message and "validate sent no token" in line.message
    [gate] = found["gated-model-needs-token"]
    assert gate.severity == "error" and "(gated: the Hub answered validate 401 GatedRepo (no token))" in (
        gate.message
    )


def test_a_gated_repository_with_validates_token_is_judged(
    hub: StandInHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub.repos[UNSHIPPED].token = TOKEN
    monkeypatch.setenv("HF_TOKEN", "hf_another_account")
    [line] = _run(_unshipped(), "model-facts-source")
    assert "403 GatedRepo" in line.message and "validate's token (HF_TOKEN) has no access" in line.message
    hub_facts.forget()
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    found = _by_rule(_run(_unshipped(), *SHAPE_RULES, "model-facts-source"))
    assert set(found) == set(FIRING), found
    assert any(r.authorization == f"Bearer {TOKEN}" for r in hub.requests)
    # read with validate's token, the gate is what the Hub answers without one: the engine's download
    # when the values name no tokenSecret
    values = _unshipped(source={"huggingface": {"tokenSecret": {"name": "", "key": "token"}}})
    [gate] = _run(values, "gated-model-needs-token")
    assert "(gated: the Hub answered validate 401 GatedRepo (no token))" in gate.message
    hub.repos[UNSHIPPED].token = None
    hub_facts.forget()
    assert _run(values, "gated-model-needs-token") == []


def test_a_revision_the_repository_lacks_is_an_error_on_the_revision(hub: StandInHub) -> None:
    values = _unshipped(source={"huggingface": {"revision": "v9"}})
    found = _by_rule(_run(values, "hub-revision-exists", "model-facts-source", "max-model-len-within-model"))
    [missing] = found["hub-revision-exists"]
    assert missing.severity == "error" and missing.path == "models[0].source.huggingface.revision"
    assert "revision 'v9'" in missing.message and "404 RevisionNotFound" in missing.message
    assert "max-model-len-within-model" not in found  # no facts at a revision that does not exist
    assert _run(_unshipped(source={"huggingface": {"revision": "main"}}), "hub-revision-exists") == []


def test_a_repository_the_hub_lacks_falls_through(hub: StandInHub) -> None:
    [line] = _run(_values(model="kvtier-test/no-such-model"), "model-facts-source")
    assert "has no repository kvtier-test/no-such-model (404 RepoNotFound" in line.message


def test_a_repository_without_a_config_falls_through(hub: StandInHub) -> None:
    del hub.repos[UNSHIPPED].files["config.json"]
    [line] = _run(_unshipped(), "model-facts-source")
    assert "has no config.json in kvtier-test/dense-13b@main (404 EntryNotFound)" in line.message


def test_a_config_validate_cannot_read_falls_through_and_says_why(hub: StandInHub) -> None:
    hub.add(UNSHIPPED, {**UNSHIPPED_CONFIG, "num_attention_heads": "forty"})
    [line] = _run(_unshipped(), "model-facts-source")
    assert f"the Hub's {hub.url}/{UNSHIPPED}/resolve/" in line.message and "cannot be read" in line.message
    assert "num_attention_heads" in line.message


def test_a_slow_hub_falls_through_within_a_bound(hub: StandInHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "1")
    for repo in hub.repos.values():
        repo.delay_s = 30.0
    values = _unshipped()
    values["models"].append({**copy.deepcopy(GOOD["models"][0]), "name": "second"})
    started = time.monotonic()
    found = _by_rule(_run(values, *SHAPE_RULES, "model-facts-source"))
    assert time.monotonic() - started < 20  # a bound (one timeout, then not asked again), not a timing target
    first, second = found["model-facts-source"]
    assert "did not answer" in first.message and "validate has no config.json" in first.message
    assert "did not answer" in second.message
    assert "shipped tools/kvtier/facts/models/qwen2-7b-instruct.yaml" in second.message
    assert len({r.path for r in hub.requests}) == 1  # the second model did not wait for the Hub again


def test_a_cache_that_cannot_keep_the_file_is_told_from_a_silent_hub(
    hub: StandInHub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "a-file" / "cache"))  # no folder can be made there
    values = _unshipped()
    values["models"].append({**copy.deepcopy(GOOD["models"][0]), "name": "second"})
    first, second = _run(values, "model-facts-source")
    assert "answered, but the Hugging Face cache could not keep kvtier-test/dense-13b@main's" in first.message
    assert "could not keep Qwen/Qwen2-7B-Instruct@" in second.message  # asked too: the Hub did answer


def test_a_download_that_stalls_ends_at_the_look_ups_deadline(
    hub: StandInHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "1")
    hub.repos[UNSHIPPED].body_delay_s = 120.0  # HEAD answers, GET never does in time
    started = time.monotonic()
    [line] = _run(_unshipped(), "model-facts-source")
    assert time.monotonic() - started < 20  # a bound: huggingface_hub alone waits and retries far longer
    assert "did not answer (no answer within 5 s)" in line.message


# -- the source line ---------------------------------------------------------------------------------------


def test_the_source_line_names_the_source(
    hub: StandInHub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert _run(_values(), "model-facts-source") == []  # the shipped model, read from the Hub
    facts = model_facts.find(GOOD["models"][0], {})
    assert facts is not None and facts.kind == "hub" and QWEN_PIN in facts.origin
    go_offline(monkeypatch)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))  # not the one the Hub's read filled
    [line] = _run(_values(), "model-facts-source")
    assert line.severity == "warning" and line.path == "models[0].model"
    assert (
        "its facts come from kvtier's shipped tools/kvtier/facts/models/qwen2-7b-instruct.yaml, confirmed "
        "against the published config.json (HF_HUB_OFFLINE" in line.message
    )
    assert "HF_TOKEN" in line.message and "--model-config MODEL=PATH" in line.message


def test_validate_reads_the_hub_and_reports_in_json(
    hub: StandInHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = tmp_path / "env.yaml"
    env.write_text(yaml.safe_dump({"models": _unshipped(gpusPerReplica=1)["models"]}))
    argv = ["validate", "--no-render", "--offline", "-o", "json", "-f", str(paths.VALUES / "staging.yaml")]
    code = cli.main([*argv, "-f", str(env)])
    out = json.loads(capsys.readouterr().out)  # nothing of huggingface_hub's (progress bars) in the report
    rules = {(f["rule"], f["severity"]) for f in out["environments"][0]["findings"]}
    assert code == 1 and ("max-model-len-within-model", "error") in rules, rules
    assert not any(rule == "model-facts-source" for rule, _ in rules)
