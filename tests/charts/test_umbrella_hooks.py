"""The umbrella's pods that run the pod scripts: helm test hooks (kvcheck.py, parsed with its own parser)
and the L2 eviction CronJob (l2_evict.py, run here on a real directory with the rendered arguments)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from render import find, helm_bin, render_docs

from kvtier import helm, paths
from kvtier.engine_rig import rendered
from kvtier.podscripts import kvcheck, l2_evict

CHART = paths.CHARTS / "kv-tiered-inference"
SOURCES = Path(kvcheck.__file__).parent


@pytest.fixture(autouse=True)
def _deps(need) -> None:
    need(helm_bin(3).exists(), "pinned Helm 3 not built (make tools)")
    helm.build_dependencies(CHART)


def hook_pods(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        d["metadata"]["name"]: d
        for d in find(docs, "Pod")
        if d["metadata"]["labels"].get("app.kubernetes.io/component") == "test"
        and d["metadata"]["labels"].get("app.kubernetes.io/name") == "kv-tiered-inference"
    }


def env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def test_podscripts_config_map_carries_the_toolkit_scripts() -> None:
    docs = render_docs(CHART)
    (config_map,) = [
        d for d in find(docs, "ConfigMap") if d["metadata"]["name"] == "rel-kv-tiered-inference-podscripts"
    ]
    expected = {p.name: p.read_text() for p in SOURCES.glob("*.py") if p.name != "__init__.py"}
    assert config_map["data"] == expected, (
        "run `kvtier generate`: the chart's copies differ from tools/kvtier/podscripts"
    )


def engine_image(docs: list[dict]) -> str:
    """The image of the engine Deployments' vLLM container (one image for every model)."""
    images = {
        c["image"]
        for d in docs
        if d.get("kind") == "Deployment" and "-router" not in d["metadata"]["name"]
        for c in d["spec"]["template"]["spec"]["containers"]
        if c["name"] == "vllm"
    }
    assert len(images) == 1, images
    return images.pop()


def test_helm_test_hooks_call_kvcheck_with_arguments_it_accepts() -> None:
    docs = render_docs(CHART, namespace="team-a")
    pods = hook_pods(docs)
    assert set(pods) == {
        "rel-kv-tiered-inference-qwen2-7b-router-test-router",
        "rel-kv-tiered-inference-qwen2-7b-test-crosspod",
        "rel-kv-tiered-inference-test-l2-files",
    }
    parser = kvcheck.build_parser()
    weights = {}
    for name, pod in pods.items():
        annotations = pod["metadata"]["annotations"]
        assert annotations["helm.sh/hook"] == "test"
        weights[name] = int(annotations["helm.sh/hook-weight"])
        (container,) = pod["spec"]["containers"]
        assert container["image"] == engine_image(docs)  # the vLLM image, already pulled on the GPU nodes
        assert pod["spec"]["nodeSelector"] == {"node.kubernetes.io/instance-type": "ml.g6e.4xlarge"}
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        assert mounts["podscripts"] == "/podscripts"
        command = container["command"]
        if command[0] == "sh":  # crosspod: the replicas come from the headless Service's DNS answer
            script = command[2]
            assert 'getent ahostsv4 "$ENGINE_SERVICE"' in script
            line = script[script.index("exec python3") :].replace("\\\n", " ")
            values = {**env(container), "1": "10.0.0.1", "2": "10.0.0.2"}
            line = re.sub(r"\$(\w+)", lambda m, values=values: values[m.group(1)], line)
            command = shlex.split(line)[1:]
            assert env(container)["ENGINE_SERVICE"] == "rel-kv-tiered-inference-qwen2-7b.team-a.svc"
        assert command[:2] == ["python3", "/podscripts/kvcheck.py"]
        args = parser.parse_args(command[2:])
        if args.check == "router":
            assert args.url == "http://rel-kv-tiered-inference-qwen2-7b-router:8080"
        elif args.check == "crosspod":
            assert (args.a, args.b, args.model) == (
                "http://10.0.0.1:8000",
                "http://10.0.0.2:8000",
                "Qwen/Qwen2-7B-Instruct",
            )
            assert args.words == 1500
        else:
            assert args.check == "l2-files" and args.dir == "/mnt/curvine/l2cache"
            assert mounts["l2cache"] == "/mnt/curvine/l2cache"
    # Order: router first, then the cross-pod check writes chunks, then the L2 directory is inspected.
    assert sorted(weights, key=weights.get) == [
        "rel-kv-tiered-inference-qwen2-7b-router-test-router",
        "rel-kv-tiered-inference-qwen2-7b-test-crosspod",
        "rel-kv-tiered-inference-test-l2-files",
    ]


def test_single_replica_models_get_no_crosspod_check() -> None:
    docs = render_docs(CHART, values=[CHART / "ci" / "custom-values.yaml"])
    names = set(hook_pods(docs))
    assert "llm-small-a-test-crosspod" in names and "llm-small-b-test-crosspod" not in names
    assert {"llm-small-a-router-test-router", "llm-small-b-router-test-router"} <= names
    # kvaware engines are a StatefulSet: the check addresses replicas 0 and 1 by name.
    command = hook_pods(docs)["llm-small-a-test-crosspod"]["spec"]["containers"][0]["command"]
    args = kvcheck.build_parser().parse_args(command[2:])
    assert (args.a, args.b) == (
        "http://llm-small-a-0.llm-small-a.kv.svc:18000",
        "http://llm-small-a-1.llm-small-a.kv.svc:18000",
    )


def test_eviction_cronjob_runs_l2_evict_on_the_shared_claim(tmp_path: Path) -> None:
    docs = render_docs(CHART)
    (cron,) = find(docs, "CronJob")
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    claims = {v["name"]: v.get("persistentVolumeClaim", {}).get("claimName") for v in pod["volumes"]}
    assert claims["l2cache"] == "rel-l2cache" == find(docs, "PersistentVolumeClaim")[0]["metadata"]["name"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["l2cache"] == "/mnt/curvine/l2cache"
    command = container["command"]
    assert command[:2] == ["python3", "/podscripts/l2_evict.py"]
    args = dict(zip(command[2::2], command[3::2], strict=True))
    assert args == {
        "--dir": "/mnt/curvine/l2cache",
        "--high": "85%",
        "--low": "70%",
        "--capacity": "500Gi",
        "--min-age": "120",
        "--max-files": "100000",
        "--max-seconds": "1500",
        "--live": "/etc/l2-eviction/live-namespaces.txt",
        "--dead-grace": "3600",
        "--stale-temp-age": "3600",
    }
    # The live list is the chart's own ConfigMap: the namespace every engine's LMCache file points at.
    (live_map,) = [
        c for c in find(docs, "ConfigMap") if c["metadata"]["name"] == "rel-kv-tiered-inference-l2-eviction"
    ]
    volume = next(v for v in pod["volumes"] if v["name"] == "live-namespaces")
    assert volume["configMap"]["name"] == live_map["metadata"]["name"]
    assert args["--live"] == f"{mounts['live-namespaces']}/live-namespaces.txt"
    live = live_map["data"]["live-namespaces.txt"].split()
    lmcache = yaml.safe_load(
        next(c for c in find(docs, "ConfigMap") if c["metadata"]["name"].endswith("-lmcache"))["data"][
            "lmcache.yaml"
        ]
    )
    assert live == [(rendered.l2_path(lmcache) or "").rstrip("/").rsplit("/", 1)[1]]

    # The same arguments on a real directory (the chart's own copy of the script): 500Gi is scaled down
    # by pointing --capacity at a 100 KiB "claim", everything else as rendered. A namespace of a
    # configuration no longer deployed goes first; then the oldest live chunks.
    (tmp_path / "live.txt").write_text(live_map["data"]["live-namespaces.txt"])
    l2 = tmp_path / "l2"
    live_dir, dead_dir = l2 / live[0], l2 / "qwen2-7b.000000000000"
    for directory in (live_dir, dead_dir):
        directory.mkdir(parents=True)
        for i in range(5):
            chunk = directory / f"vllm@m@1@0@{i:04x}-SEP-fp16.data"
            chunk.write_bytes(b"\0" * 10240)
            stamp = time.time() - 7200 + i
            os.utime(chunk, (stamp, stamp))
    # A temp file its writer left two hours ago (killed mid-write), and one being written now.
    orphan, in_flight = live_dir / "vllm@m@1@0@dead-SEP-fp16.tmp", live_dir / "vllm@m@1@0@live-SEP-fp16.tmp"
    for temp, age_s in ((orphan, 7200), (in_flight, 1)):
        temp.write_bytes(b"\0" * 1024)
        os.utime(temp, (time.time() - age_s, time.time() - age_s))
    argv = [*command[2:]]
    for flag, value in (("--dir", l2), ("--capacity", "50Ki"), ("--live", tmp_path / "live.txt")):
        argv[argv.index(flag) + 1] = str(value)
    run = subprocess.run(
        [sys.executable, str(CHART / "files" / "podscripts" / "l2_evict.py"), *argv],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    assert report["dead_files"] == 5 and not dead_dir.exists()
    assert report["stale_temp_files"] == 1 and not orphan.exists() and in_flight.exists()
    assert report["evicted_files"] == 2 and report["used_bytes_after"] == 3 * 10240 + 1024
    assert l2_evict.parse_size("500Gi") == 500 * 2**30  # the rendered capacity parses as the claim size


def test_eviction_capacity_and_schedule_follow_values() -> None:
    docs = render_docs(CHART, values=[CHART / "ci" / "custom-values.yaml"])
    (cron,) = find(docs, "CronJob")
    assert cron["spec"]["schedule"] == "17 * * * *"
    command = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[-1] == "--dry-run"
    args = dict(zip(command[2:-1:2], command[3:-1:2], strict=True))
    assert args == {
        "--dir": "/var/lib/kv/l2",
        "--high": "15Gi",
        "--low": "10Gi",
        "--capacity": "20Gi",
        "--min-age": "30",
        "--max-files": "5000",
        "--max-seconds": "1500",
        "--stale-temp-age": "3600",
    }
    # removeDeadNamespaces false: no live list, so the job treats every namespace as live.
    assert not [c for c in find(docs, "ConfigMap") if c["metadata"]["name"].endswith("-l2-eviction")]


def test_passed_test_pods_are_deleted_so_they_do_not_hold_the_l2_claim() -> None:
    """A completed pod that mounts a PVC blocks the claim's deletion (PVC protection) at uninstall."""
    pods = hook_pods(render_docs(CHART, namespace="team-a"))
    assert pods
    for name, pod in pods.items():
        policy = pod["metadata"]["annotations"]["helm.sh/hook-delete-policy"].split(",")
        assert "hook-succeeded" in policy, name
        assert "before-hook-creation" in policy, name
