"""The L2 warm-up as the umbrella renders it (cache.warmup): the hook Job's arguments read by l2_warm.py's
own parser, its namespace directory held to the one the engines' LMCache config writes, the prefixes file
read by l2_warm.py's own loader, Helm's map merge (a later values file adds and removes one prefix), the
eviction job's pins run through the real l2_evict.py, and the network policies' selectors held to the
pods' labels. Helm 3 and 4 (real binaries) render each case."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from render import find, helm_bin, render, render_docs

from kvtier import helm, paths
from kvtier.load import soak_pod
from kvtier.podscripts import l2_evict, l2_warm

CHART = paths.CHARTS / "kv-tiered-inference"
MODEL = "qwen2-7b"
LONG = "You are the support assistant of Example Corp. " * 60
WARMUP = {
    "cache": {
        "warmup": {
            "prefixes": {
                MODEL: {
                    "support": {"text": LONG},
                    "chat": {"messages": [{"role": "system", "content": LONG}]},
                    "contract": {"configMap": {"name": "rag-preambles", "key": "contract.txt"}},
                    "tenant-a": {"text": LONG, "cacheSalt": "tenant-a-secret"},
                }
            }
        }
    }
}
MAJORS = [3, 4]


@pytest.fixture(autouse=True)
def _deps(need) -> None:
    for major in MAJORS:
        need(helm_bin(major).exists(), f"pinned Helm {major} not built (make tools)")
    helm.build_dependencies(CHART)


def values_file(folder: Path, name: str, values: dict[str, Any]) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def labels_match(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A NetworkPolicy podSelector's matchLabels and In-expressions against a pod's labels."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        assert expression["operator"] == "In", expression
        if labels.get(expression["key"]) not in expression["values"]:
            return False
    return True


def pod_labels(docs: list[dict[str, Any]], kind: str, component: str) -> dict[str, str]:
    for doc in find(docs, kind):
        labels = doc["spec"]["template"]["metadata"]["labels"]
        if labels.get("app.kubernetes.io/component") == component:
            return labels
    raise AssertionError(f"no {kind} of component {component}")


@pytest.mark.parametrize("major", MAJORS)
def test_the_hook_job_warms_the_namespace_the_engines_write(major: int, tmp_path: Path) -> None:
    docs = render_docs(CHART, values=[values_file(tmp_path, "warm", WARMUP)], major=major)
    (job,) = find(docs, "Job")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade"
    assert job["spec"]["backoffLimit"] == 0  # a retry would find the prefixes cached on the verifier
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"][:2] == ["python3", "/podscripts/l2_warm.py"]
    args = l2_warm.build_parser().parse_args(container["command"][2:])
    assert (args.model, args.service, args.port) == (
        "Qwen/Qwen2-7B-Instruct",
        f"rel-kv-tiered-inference-{MODEL}.kv.svc",
        8000,
    )
    assert (args.min_replicas, args.chunk_tokens, args.pin, args.on_failure) == (2, 256, True, "fail")

    # The namespace directory is the one the engines' LMCache configuration writes (read as the soak's pod
    # script reads it from the engine's own config file).
    (lmcache,) = [d for d in find(docs, "ConfigMap") if "lmcache" in d["metadata"]["name"]]
    config = tmp_path / "lmcache.yaml"
    config.write_text(next(iter(lmcache["data"].values())))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LMCACHE_CONFIG_FILE", str(config))
        assert str(soak_pod.namespace_dir(Path("/unused"))) == args.namespace_dir
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert args.namespace_dir.startswith(mounts["l2cache"] + "/")

    # The prefixes file, as the pod sees it: the ConfigMap key at the projected path, read by l2_warm.py.
    (listing,) = find(docs, "ConfigMap", "rel-kv-tiered-inference-warmup")
    volumes = {v["name"]: v for v in pod["volumes"]}
    sources = volumes["prefixes"]["projected"]["sources"]
    own = sources[0]["configMap"]["items"][0]
    assert args.prefixes == f"{mounts['prefixes']}/{own['path']}"
    prefixes_file = tmp_path / "prefixes.json"
    prefixes_file.write_text(listing["data"][own["key"]])
    prefixes = {p.name: p for p in l2_warm.load_prefixes(str(prefixes_file))}
    assert set(prefixes) == {"support", "chat", "contract", "tenant-a"}
    assert prefixes["chat"].messages == [{"role": "system", "content": LONG}]
    assert prefixes["tenant-a"].cache_salt == "tenant-a-secret" and prefixes["support"].text == LONG
    (rag,) = [s["configMap"] for s in sources[1:]]
    assert rag["name"] == "rag-preambles" and rag["optional"] is True  # a missing one is the report's
    assert prefixes["contract"].file == f"{mounts['prefixes']}/{rag['items'][0]['path']}"
    assert rag["items"][0]["key"] == "contract.txt"


@pytest.mark.parametrize("major", MAJORS)
def test_a_later_values_file_adds_and_removes_one_prefix(major: int, tmp_path: Path) -> None:
    """Prefixes are maps, so Helm merges them: an environment adds one and removes one (null) without
    repeating the others."""
    base = values_file(tmp_path, "base", WARMUP)
    env = {"cache": {"warmup": {"prefixes": {MODEL: {"support": None, "faq": {"text": LONG}}}}}}
    docs = render_docs(CHART, values=[base, values_file(tmp_path, "env", env)], major=major)
    (listing,) = find(docs, "ConfigMap", "rel-kv-tiered-inference-warmup")
    names = [p["name"] for p in json.loads(listing["data"][f"{MODEL}.json"])["prefixes"]]
    assert names == ["chat", "contract", "faq", "tenant-a"]
    (evict_config,) = find(docs, "ConfigMap", "rel-kv-tiered-inference-l2-eviction")
    pinned = evict_config["data"]["pinned-prefixes.txt"].split()
    assert [line.split("/")[1] for line in pinned] == names


def test_eviction_keeps_exactly_the_listed_prefixes_pins(tmp_path: Path) -> None:
    """The CronJob's rendered arguments, run with the real l2_evict.py on a directory laid out as the
    warm-up leaves it: pinned chunks of listed prefixes stay, everything else above the watermark goes."""
    docs = render_docs(CHART, values=[values_file(tmp_path, "warm", WARMUP)])
    (cron,) = find(docs, "CronJob")
    (container,) = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    command = container["command"]
    (evict_config,) = find(docs, "ConfigMap", "rel-kv-tiered-inference-l2-eviction")
    mount = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}["live-namespaces"]
    assert command[command.index("--pins") + 1] == f"{mount}/pinned-prefixes.txt"
    listing = tmp_path / "pinned-prefixes.txt"
    listing.write_text(evict_config["data"]["pinned-prefixes.txt"])
    namespace = listing.read_text().split()[0].split("/")[0]
    root = tmp_path / "l2"
    (root / namespace).mkdir(parents=True)
    for index in range(10):
        (root / namespace / f"chunk{index}.data").write_bytes(b"k" * 4096)
    pinned = {"support": ["chunk0.data", "chunk1.data"], "gone-from-values": ["chunk2.data"]}
    for prefix, files in pinned.items():
        l2_warm.write_pin(str(root / namespace), prefix, set(files), [1, 2, 3], None)
    report = l2_evict.evict(
        str(root), high="1", low="0", capacity="1Gi", pins=l2_evict.read_pins(str(root), str(listing))
    )
    left = sorted(p.name for p in (root / namespace).glob("*.data"))
    assert left == ["chunk0.data", "chunk1.data"], report["summary"]
    assert sorted(report["pins_missing"]) == sorted(
        f"{namespace}/{name}" for name in ("chat", "contract", "tenant-a")
    )


def test_the_warmup_pods_reach_the_engines_and_nothing_else(tmp_path: Path) -> None:
    docs = render_docs(CHART, values=[values_file(tmp_path, "warm", WARMUP)])
    warmup = pod_labels(docs, "Job", "l2-warmup")
    engine = pod_labels(docs, "Deployment", "engine")
    router = pod_labels(docs, "Deployment", "router")
    policies = {d["metadata"]["name"]: d["spec"] for d in find(docs, "NetworkPolicy")}
    engine_policy = policies[f"rel-kv-tiered-inference-{MODEL}"]
    assert labels_match(engine_policy["podSelector"], engine)
    http = [rule for rule in engine_policy["ingress"] if {"port": "http", "protocol": "TCP"} in rule["ports"]]
    assert any(labels_match(peer["podSelector"], warmup) for peer in http[0]["from"])
    warm_policy = policies["rel-kv-tiered-inference-warmup"]
    assert labels_match(warm_policy["podSelector"], warmup)
    assert "ingress" not in warm_policy and warm_policy["policyTypes"] == ["Ingress", "Egress"]
    to_pods = [rule for rule in warm_policy["egress"] if rule.get("to")]
    assert [rule["ports"] for rule in to_pods] == [[{"port": 8000, "protocol": "TCP"}]]
    (peer,) = to_pods[0]["to"]
    assert labels_match(peer["podSelector"], engine) and not labels_match(peer["podSelector"], router)
    # Without prefixes, nothing of the warm-up renders.
    plain = render_docs(CHART)
    assert not find(plain, "Job")
    assert "rel-kv-tiered-inference-warmup" not in {d["metadata"]["name"] for d in plain}
    (cron,) = find(plain, "CronJob")
    assert "--pins" not in cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"]


def test_statefulset_engines_are_warmed_and_verified_by_name(tmp_path: Path) -> None:
    """kvaware routing runs the engines as a StatefulSet: replica 0 writes, replica 1 verifies."""
    custom = CHART / "ci" / "custom-values.yaml"
    warm = {"cache": {"warmup": {"prefixes": {"small-a": {"support": {"text": LONG}}}, "pin": False}}}
    docs = render_docs(CHART, values=[custom, values_file(tmp_path, "warm", warm)])
    (job,) = find(docs, "Job")
    args = l2_warm.build_parser().parse_args(job["spec"]["template"]["spec"]["containers"][0]["command"][2:])
    assert args.replica == [
        "http://llm-small-a-0.llm-small-a.kv.svc:18000",
        "http://llm-small-a-1.llm-small-a.kv.svc:18000",
    ]
    assert args.chunk_tokens == 512 and not args.pin
    (cron,) = find(docs, "CronJob")
    assert "--pins" not in cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"]


@pytest.mark.parametrize(
    ("prefix", "words"),
    [
        ({"text": "a", "messages": [{"role": "system", "content": "b"}]}, "oneOf"),
        ({}, "oneOf"),
        ({"messages": [{"content": "no role"}]}, "role"),
        ({"configMap": {"name": "Upper_Case", "key": "k"}}, "configMap/name"),
        ({"text": "a", "cacheSalt": ""}, "cacheSalt"),
        ({"text": "a", "tenant": "x"}, "tenant"),
    ],
)
def test_the_schema_refuses_what_the_warm_up_cannot_send(prefix: dict, words: str, tmp_path: Path) -> None:
    values = {"cache": {"warmup": {"prefixes": {MODEL: {"p": prefix}}}}}
    result = render(CHART, values=[values_file(tmp_path, "bad", values)])
    assert result.returncode != 0 and words in result.stderr, result.stderr


def test_a_prefix_name_that_is_no_file_name_is_refused(tmp_path: Path) -> None:
    values = {"cache": {"warmup": {"prefixes": {MODEL: {"../etc": {"text": "a"}}}}}}
    result = render(CHART, values=[values_file(tmp_path, "bad", values)])
    assert result.returncode != 0 and "../etc" in result.stderr, result.stderr
