"""`kvtier validate` on a corpus of realistic mistakes mined from upstream users' reports (tests/corpus/).

Each entry is one YAML file: the upstream report it comes from (`source`), what the user got wrong
(`what`), a bundled environment (`base`, a file under values/), the user's override layered over it as a
`-f` file (`values`), and the key a finding must name (`expect`), or `ok` for a valid control that must
pass. Every judge runs, the API server's dry run included (on this tier's local control plane), and an
error must name the key in the user's file. Two marks keep honest books of what is not caught: `needs`
(only a live cluster, or the Hugging Face Hub, could see it) and `open` (validate could see it but does
not yet: why). A marked entry must still be missed, so the day validate learns it the mark has to go.
The run prints, per category, what every judge caught and what the offline layers alone caught.
An entry about a model's own files may give `hub_config`: the keys of the config.json the Hub serves for its
first model (as its source quotes them), put where validate's Hub look-up leaves what it read (a Hugging Face
cache of the test's own), since the tests never ask the real Hub.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness.hub_stand_in import commit_of, own_hub_cache
from kvtier import helmyaml, paths
from kvtier.cluster.common.rest import Rest
from kvtier.validate import pipeline
from kvtier.validate.findings import SERVER, Finding
from kvtier.validate.layers import server

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "mistakes"
ENTRIES = sorted(CORPUS.glob("*.yaml"))
FIELDS = {"source", "what", "category", "base", "values", "expect", "needs", "open", "hub_config"}
OPTIONS = dict(helm_majors=(3, 4), minors=("1.35",), namespace="corpus")
tally: Counter[tuple[str, str]] = Counter()


def read(entry: Path) -> dict[str, Any]:
    data = helmyaml.load(entry.read_text())  # `values` typed as Helm will read them (`y`, `0o10`, `1.0`)
    assert isinstance(data, dict) and set(data) <= FIELDS, f"{entry.name}: fields {sorted(FIELDS)}"
    assert str(data.get("source", "")).startswith("https://"), f"{entry.name}: cite the upstream report"
    assert data.get("what") and data.get("category"), f"{entry.name}: say what the mistake is, and its kind"
    assert (paths.VALUES / str(data.get("base"))).is_file(), f"{entry.name}: base must be a file in values/"
    assert isinstance(data.get("values"), dict) and data.get("expect"), entry.name
    return data


def _flat(path: str) -> str:
    return re.sub(r"\[(\d+)\]", r".\1", path)


def names(finding: Finding, expect: str) -> bool:
    """The finding is about the expected key: that key, one inside it, or (a missing key) its parent;
    a chart refusal names it in its message."""
    found, wanted = _flat(finding.path), _flat(expect)
    if found and (found == wanted or found.startswith(wanted + ".") or wanted.startswith(found + ".")):
        return True
    return wanted in _flat(finding.message)


@pytest.fixture(scope="module")
def api_server(kube_cluster: Path) -> server.Judge:
    rest = Rest.from_kubeconfig(kube_cluster)
    return server.local_judge(rest, str(OPTIONS["namespace"]), {}, "the test cluster")


def stage_hub_config(data: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The entry's `hub_config` as the Hub's config.json of its first model, at its pinned revision (else
    main), in a cache of the test's own: what validate reads after asking the Hub."""
    config = data.get("hub_config")
    if config is None:
        return
    assert isinstance(config, dict), "hub_config: the config.json keys the source quotes"
    model = data["values"]["models"][0]
    revision = str(model.get("source", {}).get("huggingface", {}).get("revision") or "main")
    commit = revision if re.fullmatch(r"[0-9a-f]{40}", revision) else commit_of(config)
    repo = own_hub_cache(tmp_path, monkeypatch) / ("models--" + str(model["model"]).replace("/", "--"))
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "snapshots" / commit / "config.json").write_text(json.dumps(config))
    (repo / "refs").mkdir()
    (repo / "refs" / revision).write_text(commit)


def judge(
    entry: Path, tmp_path: Path, api_server: server.Judge, monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, Any], pipeline.FileReport]:
    data = read(entry)
    stage_hub_config(data, tmp_path, monkeypatch)
    overlay = tmp_path / f"{entry.stem}.yaml"
    overlay.write_text(helmyaml.dump(data["values"], sort_keys=False))
    options = pipeline.Options(**OPTIONS, values=(overlay,))
    [report] = pipeline.validate([paths.VALUES / data["base"]], options, judge=api_server)
    return data, report


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.stem for e in ENTRIES])
def test_validate_judges_the_mistake_as_its_consumer_does(
    entry: Path, tmp_path: Path, api_server: server.Judge, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, report = judge(entry, tmp_path, api_server, monkeypatch)
    errors = [f for f in report.findings if f.severity == "error"]
    category = data["category"]
    if data["expect"] == "ok":
        tally[(category, "accepted" if not errors else "refused")] += 1
        assert not errors, f"a valid control was refused: {[f.to_json() for f in errors]}"
        return
    caught = any(names(f, data["expect"]) for f in errors)
    offline = any(names(f, data["expect"]) for f in errors if f.check != SERVER)
    tally[(category, "caught" if caught else "missed")] += 1
    tally[(category, "offline caught")] += offline
    mark = data.get("needs") or data.get("open")
    if mark:
        assert not caught, f"caught, though marked as missed ({mark!r}): drop the mark"
        return
    assert caught, (
        f"{data['what']} ({data['source']}): no error names {data['expect']}; "
        f"found {[(f.rule, f.path, f.message) for f in report.findings]}"
    )


def test_the_corpus_is_there() -> None:
    assert len(ENTRIES) >= 30, "the mined corpus went missing"


@pytest.fixture(scope="module", autouse=True)
def _print_rates():
    yield
    if tally:
        print("\nmistake corpus, per category:")
        for category in sorted({c for c, _ in tally}):
            row = {k: n for (c, k), n in tally.items() if c == category}
            print(f"  {category}: {row}")
        totals = {k: sum(n for (_, kind), n in tally.items() if kind == k) for _, k in tally}
        print(f"  all: {totals}")
