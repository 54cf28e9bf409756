"""The whole umbrella as values/cpu.yaml renders it, installed with Helm on the real node: two vLLM CPU
engines with LMCache (L1 in memory, L2 on a ReadWriteMany claim), the router discovering them through the
API server, the eviction CronJob and every `helm test` pod, all running real processes; then chart-testing's
own `ct install` of the CPU scenarios with Helm 4.

What the values change for a CPU test machine (local images, the rig's tiny model on a claim, sizes for
two shared cores, both claims hostPath volumes) is kvtier.cluster.realnode.umbrella_cpu, shared with the
tier's benchmark (benchmarks/realnode_bench.py); passed test pods are kept here for `helm test --logs`.

The engine image is the engine venv copied onto a Debian base (several GB), built once per venv and
imported into this cluster's containerd by the module's fixture.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvtier import helm, paths
from kvtier.cluster.realnode import lifecycle as realnode
from kvtier.cluster.realnode import umbrella_cpu
from kvtier.engine_rig import rig as engine_rig
from kvtier.engine_rig import tiers
from kvtier.load import experiment
from kvtier.podscripts import kvcheck
from kvtier.validate.inputs.merge import merge_layers

UMBRELLA = paths.CHARTS / "kv-tiered-inference"
RELEASE = "kv"
ENGINE_DEPLOYMENT = umbrella_cpu.engine_deployment(RELEASE)
INSTALL_TIMEOUT = umbrella_cpu.INSTALL_TIMEOUT
LOAD_SECONDS = 600  # upper bound of the load client's run; it stops when told
# Sent during the upgrade from inside the cluster, through the router's Service: one request at a time,
# each answer's status counted. Stops after LOAD_SECONDS or when /stop exists (the test writes it).
LOAD_CLIENT = """
import json, os, sys, time, urllib.request
url, model, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
counts, failures = {"ok": 0, "failed": 0}, []
deadline = time.monotonic() + seconds
while time.monotonic() < deadline and not os.path.exists("/work/stop"):
    body = json.dumps({"model": model, "prompt": "The tiered cache says", "max_tokens": 4}).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            json.loads(answer.read())
        counts["ok"] += 1
    except Exception as error:
        counts["failed"] += 1
        failures.append(f"{time.strftime('%H:%M:%S')} {type(error).__name__}: {error}"[:300])
    print(json.dumps({**counts, "last_failures": failures[-5:]}), flush=True)
    time.sleep(1)  # a steady trickle: two engines share two cores with the one starting
"""


# The L2 warm-up the install runs (cache.warmup): a system prompt as text and as chat messages (the rig's
# model renders ChatML), each more than two 256-token chunks.
WARMUP = {
    "prefixes": {
        engine_rig.MODEL_NAME: {
            "support": {"text": kvcheck.long_prompt(700, nonce="warmup-support")},
            "chat": {
                "messages": [{"role": "system", "content": kvcheck.long_prompt(600, nonce="warmup-chat")}]
            },
        }
    },
    "timeoutSeconds": 600,
}
WARMUP_JOB = f"{RELEASE}-kv-tiered-inference-warmup-{engine_rig.MODEL_NAME}"


@dataclass
class Install:
    prepared: umbrella_cpu.Prepared  # its namespace, claims and the overlay given to every install/upgrade
    engine_image: str

    @property
    def namespace(self) -> str:
        return self.prepared.namespace

    @property
    def values(self) -> Path:
        return self.prepared.values


@pytest.fixture(scope="module")
def engine_image(real_cluster: realnode.RealCluster, engine_image_in) -> str:
    return str(engine_image_in(real_cluster))


@pytest.fixture(scope="module")
def installed(kube, real_cluster, engine_image: str, l2_storage_class: str) -> Iterator[Install]:
    values = umbrella_cpu.overlay(real_cluster, engine_image)
    # Keep passed test pods, so `helm test --logs` can print every verdict (the claims here are not the
    # chart's own; the uninstall test removes the kept pods).
    values["tests"] = {"deleteSucceededPods": False}
    values["cache"]["warmup"] = WARMUP
    prepared = umbrella_cpu.prepare(kube, f"umbrella-{os.getpid()}", values, l2_storage_class)
    ns = prepared.namespace
    helm.build_dependencies(UMBRELLA)
    try:
        took = umbrella_cpu.rollout(kube, prepared, "install", RELEASE)
        print(f"[umbrella] helm install --wait and every pod Ready after {took:.0f} s")
        yield Install(prepared, engine_image)
    finally:
        # The module's own uninstall test has usually removed the release; run alone, a test leaves it here,
        # and an uninstall still waiting after 300 s must not keep the namespace from going (measured once
        # on a slow machine: the engines' pods took longer to end).
        try:
            kube.helm("helm3", "uninstall", RELEASE, "-n", ns, "--wait", check=False, timeout=300)
        except subprocess.TimeoutExpired:
            print(f"[umbrella] helm uninstall {RELEASE} still waiting after 300 s; deleting its namespace")
        umbrella_cpu.remove(kube, prepared)


def _pods(kube, ns: str, component: str) -> list[dict[str, Any]]:
    return umbrella_cpu.pods(kube, ns, RELEASE, component)


def _ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


def test_every_pod_is_ready_through_the_charts_own_probes(kube, installed: Install) -> None:
    engines, routers = _pods(kube, installed.namespace, "engine"), _pods(kube, installed.namespace, "router")
    assert len(engines) == 2 and len(routers) == 1
    for pod in engines + routers:
        assert _ready(pod), pod["status"]
        (container,) = pod["status"]["containerStatuses"]
        assert container["restartCount"] == 0, container
    engine = engines[0]["spec"]["containers"][0]
    assert engine["image"] == installed.engine_image and engine["command"] == ["vllm"]
    # LMCache really runs inside vLLM (its connector, our CPU copy stand-in), configured from the ConfigMap.
    log = kube.kubectl("logs", "-n", installed.namespace, engines[0]["metadata"]["name"])
    assert "LMCache" in log, log[-3000:]


def test_the_install_warmed_every_prefix_and_kvtier_warm_warms_them_again(
    kube, real_cluster, installed: Install
) -> None:
    """`helm install` ran the warm-up hook: its report (the Job's log) shows each prefix's chunks written
    by one engine and loaded by the other (its own hit counter), and its pins are on the L2 claim. Then
    `kvtier warm`, from inside the cluster's network namespace, runs the hook's Job again: the same pods
    hold the prefixes, so the proof is the pinned files, all still in L2."""
    ns = installed.namespace
    log = kube.kubectl("logs", "-n", ns, f"job/{WARMUP_JOB}")
    report = _last_json(log)
    print(f"[umbrella] warm-up hook: {report['summary']}")
    assert report["ok"] and report["check"] == "l2-warm", log[-3000:]
    outcomes = {p["prefix"]: p for p in report["prefixes"]}
    assert set(outcomes) == {"support", "chat"}
    for outcome in outcomes.values():
        assert outcome["proof"] == "loaded" and outcome["chunks"] >= 2, outcome
        assert (
            outcome["verified_tokens"] >= outcome["chunks"] * 256 and outcome["written"] >= outcome["chunks"]
        )
        assert outcome["writer"] != outcome["verifier"], outcome
    # The pins and the files they name, as an engine sees them on the L2 claim.
    seen = _l2_view(kube, installed, PINS_VIEW)
    (namespace_dir,) = [d for d in seen if d.startswith(f"{engine_rig.MODEL_NAME}.")]
    for name, outcome in outcomes.items():
        pin = seen[namespace_dir]["pins"][name]
        assert len(pin["files"]) == outcome["pinned"] and all(pin["present"]), pin
    config = json.loads(
        kube.kubectl("get", "configmap", "-n", ns, f"{RELEASE}-kv-tiered-inference-l2-eviction", "-o", "json")
    )
    assert sorted(config["data"]["pinned-prefixes.txt"].split()) == [
        f"{namespace_dir}/{n}" for n in ("chat", "support")
    ]

    kvtier = str(paths.ROOT / ".venv" / "bin" / "kvtier")
    argv = [kvtier, "warm", "--kubeconfig", str(real_cluster.kubeconfig), "-n", ns, "--release", RELEASE]
    proc = subprocess.run(
        real_cluster.command([*argv, "-o", "json"]), capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    (again,) = json.loads(proc.stdout)
    assert again["ok"] and again["job"] != WARMUP_JOB, again
    assert {p["prefix"]: p["verified"] for p in again["prefixes"]} == {"support": True, "chat": True}
    print(f"[umbrella] kvtier warm: {again['summary']} ({[p['proof'] for p in again['prefixes']]})")


# Each L2 namespace directory's warm-up pins and whether the files each names exist, read in an engine pod.
PINS_VIEW = """
import json, os, sys
root, view = sys.argv[1], {}
for entry in sorted(os.listdir(root)):
    pins_dir = os.path.join(root, entry, ".kvtier-warm")
    pins = {}
    for pin_file in sorted(os.listdir(pins_dir)) if os.path.isdir(pins_dir) else []:
        with open(os.path.join(pins_dir, pin_file)) as handle:
            pin = json.load(handle)
        present = [os.path.isfile(os.path.join(root, entry, name)) for name in pin["files"]]
        pins[pin_file.removesuffix(".json")] = {"files": pin["files"], "present": present}
    view[entry] = {"pins": pins}
print(json.dumps(view))
"""


def _l2_view(kube, installed: Install, script: str) -> dict[str, Any]:
    """What `script` prints (JSON) run with the L2 mount path in the first engine pod: the claim as the
    engines see it, whatever serves it."""
    engine = _pods(kube, installed.namespace, "engine")[0]["metadata"]["name"]
    mount = yaml.safe_load((paths.VALUES / "cpu.yaml").read_text())["cache"]["l2"]["mountPath"]
    out = kube.kubectl("exec", "-n", installed.namespace, engine, "--", "python3", "-c", script, mount)
    return json.loads(out.strip().splitlines()[-1])


def test_the_l2_claim_is_a_curvine_volume_mounted_through_fuse(
    kube, installed: Install, l2_storage_class: str, need
) -> None:
    """No hostPath in the L2 path: the chart's claim is bound to a volume Curvine's CSI driver provisioned,
    and the engines see it as curvine-fuse's mount."""
    need(bool(l2_storage_class), "the umbrella's L2 is the hostPath stand-in here (no Curvine binaries)")
    ns = installed.namespace
    claim = f"{RELEASE}-l2cache"
    volume = kube.kubectl("get", "pvc", claim, "-n", ns, "-o", "jsonpath={.spec.volumeName}")
    assert kube.kubectl("get", "pv", volume, "-o", "jsonpath={.spec.csi.driver}") == "curvine"
    mounts = _l2_view(
        kube,
        installed,
        "import json, sys\n"
        "print(json.dumps([l.split()[2] for l in open('/proc/mounts') if l.split()[1] == sys.argv[1]]))",
    )
    assert mounts == ["fuse.curvinefs"], mounts


def test_the_router_discovered_both_engines_through_the_api_server(kube, installed: Install) -> None:
    (router,) = _pods(kube, installed.namespace, "router")
    log = kube.kubectl("logs", "-n", installed.namespace, router["metadata"]["name"])
    for engine in _pods(kube, installed.namespace, "engine"):
        assert f"Added worker: http://{engine['status']['podIP']}:8000" in log, log[-3000:]


@pytest.mark.parametrize("helm_major", ["helm3", "helm4"])
def test_helm_test_runs_every_check_in_real_pods(kube, installed: Install, helm_major: str) -> None:
    """Router health and model list, the cross-pod L2 hit and the chunk files, each pod running kvcheck.py
    from the chart's ConfigMap; their own output comes back through the kubelet. (Completions through the
    router are the upgrade test's load.)"""
    started = time.monotonic()
    verdicts, output = umbrella_cpu.helm_test(kube, installed.namespace, RELEASE, helm_major)
    print(f"[umbrella] {helm_major} test: {time.monotonic() - started:.0f} s")
    assert sorted(verdicts) == ["crosspod", "l2-files", "router"], output[-4000:]
    assert all(v["ok"] for v in verdicts.values()), verdicts
    # Replica B's first request loaded whole chunks that replica A wrote, through the shared claim.
    hit = verdicts["crosspod"]["b"]["external_hit_tokens"]
    assert hit >= 256 and hit % 256 == 0, verdicts["crosspod"]
    assert verdicts["l2-files"]["chunks"] >= 1, verdicts["l2-files"]
    print(f"[umbrella] {helm_major} test verdicts: {verdicts['crosspod']['summary']}")


def test_the_readmes_smoke_command_reaches_the_release_through_the_default_kubeconfig(
    kube, real_cluster, installed: Install, tmp_path: Path
) -> None:
    """README's `kvtier smoke --namespace inference --release kv`, as written: no --kubeconfig, no
    $KUBECONFIG, only ~/.kube/config with its current context, as kubectl reads it. Run inside the
    cluster's network namespace, the only place its addresses exist."""
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    shutil.copy(real_cluster.kubeconfig, home / ".kube" / "config")
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"} | {"HOME": str(home)}
    argv = [str(paths.ROOT / ".venv" / "bin" / "kvtier"), "smoke", "--namespace", installed.namespace]
    argv += ["--release", RELEASE, "-o", "json"]
    proc = subprocess.run(real_cluster.command(argv), capture_output=True, text=True, env=env, timeout=600)
    assert proc.stdout.lstrip().startswith("["), f"exit {proc.returncode}\n{proc.stderr[-3000:]}"
    outcomes = {o["id"]: o for o in json.loads(proc.stdout)}
    for check in ("router", "completion", "l2-files"):
        assert outcomes[check]["status"] == "PASS", outcomes[check]
    # Replica B loaded whole chunks replica A wrote (the helm test's own check); smoke's verdict also
    # asks B's TTFT to be lower, which two shared cores do not promise, so that alone may fail.
    crosspod = outcomes["crosspod"]
    hit = crosspod["b"]["external_hit_tokens"]
    assert hit >= 256 and hit % 256 == 0, crosspod
    failed = sorted(i for i, o in outcomes.items() if o["status"] == "FAIL")
    assert failed in ([], ["crosspod"]), outcomes
    assert proc.returncode == (1 if failed else 0), proc.stderr[-3000:]
    # cpu.yaml runs without Curvine (L2 on a claim the test provides): nothing to ask a master.
    assert outcomes["curvine-workers"]["status"] == "SKIP", outcomes["curvine-workers"]


def test_a_deliberately_broken_value_makes_helm_test_fail_with_the_scripts_message(
    kube, installed: Install
) -> None:
    """tests.crosspodWords=100 (fewer tokens than one chunk): the cross-pod check must fail in its real pod,
    with the script's own verdict."""
    ns = installed.namespace
    kube.helm(
        "helm3", "upgrade", RELEASE, str(UMBRELLA), "-n", ns, "-f", str(paths.VALUES / "cpu.yaml"),
        "-f", str(installed.values), "--set", "tests.crosspodWords=100", "--wait", "--timeout", "5m",
    )  # fmt: skip
    try:
        failed = kube.helm("helm3", "test", RELEASE, "-n", ns, "--timeout", "5m", check=False, timeout=400)
        assert failed.returncode != 0, failed.stdout
        pod = f"{RELEASE}-kv-tiered-inference-{engine_rig.MODEL_NAME}-test-crosspod"
        log = kube.kubectl("logs", "-n", ns, pod)
        verdict = _last_json(log)
        assert verdict["check"] == "crosspod" and verdict["ok"] is False, verdict
    finally:
        kube.helm("helm3", "rollback", RELEASE, "-n", ns, "--wait", "--timeout", "5m", timeout=400)


def _helm_values(installed: Install, *extra: str) -> list[str]:
    return ["-f", str(paths.VALUES / "cpu.yaml"), "-f", str(installed.values), *extra]


def _revision(kube, ns: str) -> int:
    history = json.loads(kube.helm("helm3", "history", RELEASE, "-n", ns, "-o", "json").stdout)
    return int(history[-1]["revision"])


def _start_load(kube, real_cluster, ns: str) -> str:
    """The load client pod, sending completions through the router's Service by its DNS name."""
    router = f"{RELEASE}-kv-tiered-inference-{engine_rig.MODEL_NAME}-router"
    url = f"http://{router}.{ns}.svc.cluster.local:8080/v1/completions"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "load", "namespace": ns},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "load",
                    "image": real_cluster.images["python"],
                    "imagePullPolicy": "Never",
                    "command": ["python3", "-c", LOAD_CLIENT, url, engine_rig.MODEL_NAME, str(LOAD_SECONDS)],
                    "volumeMounts": [{"name": "work", "mountPath": "/work"}],
                }
            ],
            "volumes": [{"name": "work", "emptyDir": {}}],
        },
    }
    kube.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    kube.kubectl("wait", "-n", ns, "--for=condition=Ready", "pod/load", "--timeout=120s")
    return "load"


def _last_json(log: str) -> dict[str, Any]:
    """The last line of a pod's log that is a JSON object: the report the pod prints last on stdout. Its
    stderr lines are a separate stream, which the container runtime may write to the log after it."""
    for line in reversed(log.strip().splitlines()):
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict):
            return found
    raise AssertionError(f"no JSON report in the log:\n{log[-3000:]}")


def _stop_load(kube, ns: str, pod: str) -> dict[str, Any]:
    kube.kubectl("exec", "-n", ns, pod, "--", "touch", "/work/stop")
    kube.wait_phase(ns, pod, {"Succeeded", "Failed"}, timeout=120)
    return _last_json(kube.kubectl("logs", "-n", ns, pod))


def test_an_upgrade_rolls_the_engines_while_requests_keep_being_served(
    kube, real_cluster, installed: Install
) -> None:
    """A changed engine value rolls both engines one at a time (maxUnavailable 1, preStop sleep while
    discovery drops the pod); a client sends requests through the router the whole time."""
    ns = installed.namespace
    before = {p["metadata"]["name"] for p in _pods(kube, ns, "engine")}
    revision = _revision(kube, ns)
    load = _start_load(kube, real_cluster, ns)
    time.sleep(5)
    rolled_s = umbrella_cpu.rollout(
        kube, installed.prepared, "upgrade", RELEASE, "--set", "engine.startupProbe.periodSeconds=4"
    )
    time.sleep(10)  # requests after the rollout, on the new engines only
    counts = _stop_load(kube, ns, load)
    print(f"[umbrella] upgrade rolled the engines in {rolled_s:.0f} s; requests during it: {counts}")
    after = _pods(kube, ns, "engine")
    assert len(after) == 2 and not before & {p["metadata"]["name"] for p in after}, "both engines rolled"
    assert all(_ready(p) for p in after)
    assert _revision(kube, ns) == revision + 1
    assert counts["ok"] > 0, counts
    assert counts["failed"] == 0, counts


def test_rollback_restores_the_previous_revision(kube, installed: Install) -> None:
    """Back to the revision before the upgrade. Helm 3's --wait returns once replicas - maxUnavailable
    engines of the restored template are Ready (one here); the second one's roll is not waited for."""
    ns = installed.namespace
    revision = _revision(kube, ns)
    rollback = ["rollback", RELEASE, str(revision - 1), "-n", ns, "--wait", "--timeout", INSTALL_TIMEOUT]
    kube.helm("helm3", *rollback, timeout=1000)
    history = json.loads(kube.helm("helm3", "history", RELEASE, "-n", ns, "-o", "json").stdout)
    assert history[-1]["revision"] == revision + 1 and history[-1]["status"] == "deployed", history[-1]
    assert f"Rollback to {revision - 1}" in history[-1]["description"], history[-1]
    deployment = json.loads(kube.kubectl("get", "deployment", ENGINE_DEPLOYMENT, "-n", ns, "-o", "json"))
    probe = deployment["spec"]["template"]["spec"]["containers"][0]["startupProbe"]
    assert probe["periodSeconds"] == 5  # values/cpu.yaml's again
    assert any(_ready(p) for p in _pods(kube, ns, "engine"))


SOAK_FAULTS = ("change-chunks", "kill-engine", "l2-gone")


def test_the_soak_against_the_release_serves_no_wrong_answer_under_pod_deletes_and_damaged_chunks(
    kube, real_cluster, installed: Install, tmp_path: Path
) -> None:
    """`kvtier soak` as a user runs it against their release, from inside the cluster's network namespace:
    references from the release one request at a time, then the mix through a port-forward per router pod
    while chunk files are changed in an engine pod (exec), one engine pod is force-deleted until its
    replacement is Ready, and the L2 namespace goes away and comes back. kill-router is refused on
    port-forwards (asked for below), l2-full and l2-read-only on any release."""
    ns = installed.namespace
    umbrella_cpu.wait_ready(kube, ns, RELEASE)  # the rollback does not wait for the second engine
    before = {p["metadata"]["name"] for p in _pods(kube, ns, "engine")}
    kvtier = str(paths.ROOT / ".venv" / "bin" / "kvtier")
    tokenizer = installed.prepared.volumes / "models" / engine_rig.MODEL_NAME
    argv = [kvtier, "soak", "--kubeconfig", str(real_cluster.kubeconfig), "-n", ns, "--release", RELEASE]
    argv += ["--qps", "2", "--max-prompt-tokens", str(experiment.RIG_MAX_PROMPT)]
    argv += ["--tokenizer", str(tokenizer), "--out", str(tmp_path)]
    refused = subprocess.run(
        real_cluster.command([*argv, "--faults", "kill-router"]), capture_output=True, text=True, timeout=300
    )
    assert refused.returncode == 2 and "--router-url" in refused.stderr, refused.stderr[-2000:]
    proc = subprocess.run(
        real_cluster.command([*argv, "--faults", ",".join(SOAK_FAULTS), "--requests", "12", "-o", "json"]),
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert proc.stdout.lstrip().startswith("["), f"exit {proc.returncode}\n{proc.stderr[-3000:]}"
    rows = {row["fault"]: row for row in json.loads(proc.stdout)}
    print(f"[umbrella] soak: {json.dumps(rows)}")
    assert list(rows) == list(SOAK_FAULTS)
    for row in rows.values():
        assert not row["fault_error"] and row["requests"] == 12, row
        # failed_otherwise counts answers cut short outside a kill's window too (soak.cut_short)
        assert row["wrong"] == 0 and row["chunks_lost"] == 0 and row["failed_otherwise"] == 0, row
    assert rows["change-chunks"]["files_damaged"] > 0, rows["change-chunks"]
    assert rows["kill-engine"]["recovered_s"] > 0 and rows["l2-gone"]["away_s"] > 0, rows
    assert proc.returncode == 0, proc.stderr[-3000:]
    after = {p["metadata"]["name"] for p in _pods(kube, ns, "engine") if _ready(p)}
    assert len(after) == len(before) and after != before, (before, after)  # one pod was replaced

    # kill-router through the router's Service, as a client in the cluster reaches it (kube-proxy): the
    # forced delete of values/cpu.yaml's one router replica fails what is sent until its replacement is
    # Ready, and nothing else.
    selector = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=router"
    (service,) = json.loads(kube.kubectl("get", "svc", "-n", ns, "-l", selector, "-o", "json"))["items"]
    port = next(p["port"] for p in service["spec"]["ports"] if p["name"] == "http")
    url = f"http://{service['spec']['clusterIP']}:{port}"
    routed = [*argv, "--faults", "none,kill-router", "--router-url", url, "--requests", "8", "-o", "json"]
    proc = subprocess.run(real_cluster.command(routed), capture_output=True, text=True, timeout=900)
    assert proc.stdout.lstrip().startswith("["), f"exit {proc.returncode}\n{proc.stderr[-3000:]}"
    none, killed = json.loads(proc.stdout)
    print(f"[umbrella] soak through the Service: {json.dumps(killed)}")
    assert none["failed"] == 0 and not killed["fault_error"] and killed["recovered_s"] > 0, killed
    assert killed["wrong"] == 0 and killed["failed_otherwise"] == 0, killed


def test_uninstall_leaves_nothing_of_the_release_behind(
    kube, installed: Install, l2_storage_class: str
) -> None:
    """Every release object goes. `helm test` pods are Helm hooks, never release objects: uninstall leaves
    the kept ones (this test keeps passed ones; a failed one is kept with any setting), and the selector
    the chart's values comment gives removes exactly them. The chart's own L2 claim (on Curvine) is a
    release object that a kept pod mounting it holds back (PVC protection): as the values' comment says, the
    kept pods go first there, then the claim goes with the release and its volume with the claim."""
    ns = installed.namespace
    selector = f"app.kubernetes.io/instance={RELEASE}"
    kinds = "all,configmaps,secrets,serviceaccounts,roles,rolebindings,poddisruptionbudgets,cronjobs,jobs"
    if l2_storage_class:
        _delete_kept_hook_pods(kube, ns, selector)
        volume = kube.kubectl(
            "get", "pvc", f"{RELEASE}-l2cache", "-n", ns, "-o", "jsonpath={.spec.volumeName}"
        )
    kube.helm("helm3", "uninstall", RELEASE, "-n", ns, "--wait", "--timeout", "5m")
    test_pods: set[str] = set()
    if not l2_storage_class:
        test_pods = {
            f"pod/{RELEASE}-kv-tiered-inference-test-l2-files",
            f"pod/{RELEASE}-kv-tiered-inference-{engine_rig.MODEL_NAME}-router-test-router",
            f"pod/{RELEASE}-kv-tiered-inference-{engine_rig.MODEL_NAME}-test-crosspod",
        }
        # The last warm-up hook Job is a hook too, kept for its report until its TTL
        # (cache.warmup.ttlSecondsAfterFinished), with its pod; so are the Jobs `kvtier warm` made.
        warmups = set(
            kube.kubectl(
                "get", "jobs,pods", "-n", ns, "-l", f"{selector},{WARMUP_LABEL}", "-o", "name"
            ).split()
        )
        assert f"job.batch/{WARMUP_JOB}" in warmups, warmups
        test_pods |= warmups
    deadline = time.monotonic() + 180  # the eviction job's own Jobs and pods go by garbage collection
    while True:
        left = set(kube.kubectl("get", kinds, "-n", ns, "-l", selector, "-o", "name").split())
        if left <= test_pods or time.monotonic() > deadline:
            break
        time.sleep(3)
    assert left == test_pods, left
    _delete_kept_hook_pods(kube, ns, selector)
    assert kube.kubectl("get", kinds, "-n", ns, "-l", selector, "-o", "name").strip() == ""
    releases = kube.kubectl("get", "secrets", "-n", ns, "-l", "owner=helm", "-o", "name")
    assert releases.strip() == "", releases
    claims = kube.kubectl("get", "pvc", "-n", ns, "-o", "name")
    if l2_storage_class:
        # The chart's claim went with the release, and its Curvine volume with it (reclaimPolicy Delete).
        assert f"{RELEASE}-l2cache" not in claims, claims
        kube.kubectl("wait", "--for=delete", f"pv/{volume}", "--timeout=120s")
    else:
        # The user's claims stay: the L2 holds data an uninstall must not take (existingClaim).
        assert "kv-l2" in claims


WARMUP_LABEL = "app.kubernetes.io/component=l2-warmup"


def _delete_kept_hook_pods(kube, ns: str, selector: str) -> None:
    """The kept `helm test` pods and warm-up Jobs, by the selectors the chart's values comment gives."""
    kube.kubectl("delete", "pod", "-n", ns, "-l", f"{selector},app.kubernetes.io/component=test", "--wait")
    kube.kubectl(
        "delete", "jobs", "-n", ns, "-l", f"{selector},{WARMUP_LABEL}", "--cascade=foreground", "--wait"
    )


def test_the_native_backend_serves_a_cross_pod_hit_through_the_same_l2(
    kube, real_cluster, installed: Install, l2_storage_class: str
) -> None:
    """`cache.backend: vllm-native` (vLLM's OffloadingConnector, its sealed fs tier as the L2) installed as a
    second release in a namespace of its own, on the same kind of L2 claim (Curvine's where it runs): its
    `helm test` cross-pod check passes, replica B loading whole chunks that A wrote through the claim."""
    values = umbrella_cpu.overlay(real_cluster, installed.engine_image, backend=tiers.NATIVE)
    values["tests"] = {"deleteSucceededPods": False}  # `helm test --logs` reads every pod's verdict
    prepared = umbrella_cpu.prepare(kube, f"native-{os.getpid()}", values, l2_storage_class)
    ns = prepared.namespace
    try:
        took = umbrella_cpu.rollout(kube, prepared, "install", RELEASE)
        print(f"[umbrella] native backend: helm install --wait and every pod Ready after {took:.0f} s")
        verdicts, output = umbrella_cpu.helm_test(kube, ns, RELEASE)
        assert verdicts.get("crosspod", {}).get("ok"), output[-4000:]
        hit = verdicts["crosspod"]["b"]["external_hit_tokens"]
        assert hit >= 256 and hit % 256 == 0, verdicts["crosspod"]
        print(f"[umbrella] native backend helm test: {verdicts['crosspod']['summary']}")
    finally:
        _delete_kept_hook_pods(kube, ns, f"app.kubernetes.io/instance={RELEASE}")
        kube.helm("helm3", "uninstall", RELEASE, "-n", ns, "--wait", "--timeout", "5m", check=False)
        umbrella_cpu.remove(kube, prepared)


# The umbrella's ci/ scenarios that can run on CPU when laid over values/cpu.yaml. Not the others:
# custom-values pulls from a registry that does not exist here, small-values is the GPU + Curvine shape
# at KWOK size (a GPU model and the chart's own Curvine claim, what a CPU cluster lacks).
CT_SCENARIOS = {"cpu": None, "cpu-tiers-off": "tiers-off-values.yaml"}


def _ct_charts(root: Path, overlay_values: dict[str, Any]) -> Path:
    """Both charts copied side by side (the umbrella's Curvine dependency is file://../curvine), the
    umbrella's ci/ holding one file per CPU scenario: values/cpu.yaml, the scenario without its models
    (GPU-shaped), the test overlay (local images, the rig's model, sizes), merged as Helm would."""
    for chart in ("curvine", "kv-tiered-inference"):
        shutil.copytree(paths.CHARTS / chart, root / chart, ignore=shutil.ignore_patterns("ci", "*.tgz"))
    (root / "kv-tiered-inference" / "ci").mkdir()
    cpu = yaml.safe_load((paths.VALUES / "cpu.yaml").read_text())
    for name, scenario in CT_SCENARIOS.items():
        values = cpu
        if scenario:
            drawn = yaml.safe_load((UMBRELLA / "ci" / scenario).read_text())
            values = merge_layers(values, {k: v for k, v in drawn.items() if k != "models"})
        values = merge_layers(values, overlay_values)
        (root / "kv-tiered-inference" / "ci" / f"{name}-values.yaml").write_text(yaml.safe_dump(values))
    return root / "kv-tiered-inference"


def test_ct_install_runs_the_cpu_scenarios_with_helm4(
    kube, real_cluster, installed: Install, tmp_path
) -> None:
    """chart-testing's own `ct install` (ct.yaml's settings) with Helm 4 on the path: for each scenario it
    installs with --wait, runs `helm test` and uninstalls. Its release names are random, so it runs in the
    namespace that already holds the claims (ct's --namespace with --release-label). Runs after the
    uninstall test: no other release is left there."""
    overlay_values = yaml.safe_load(installed.values.read_text())
    overlay_values["tests"] = {"deleteSucceededPods": True}  # ct reads no logs; passed pods go
    # The module's warm-up belongs to its own release: ct's scenarios are the chart's ci/ files (one turns
    # L2 off, where the chart refuses a warm-up list).
    overlay_values["cache"].pop("warmup", None)
    chart = _ct_charts(tmp_path / "charts", overlay_values)
    bin_dir = tmp_path / "bin"  # ct calls `helm` and `kubectl` from PATH
    bin_dir.mkdir()
    (bin_dir / "helm").symlink_to(paths.TOOLS_BIN / "helm4")
    (bin_dir / "kubectl").symlink_to(paths.TOOLS_BIN / "kubectl")
    ns = installed.namespace
    started = time.monotonic()
    output = kube.run(
        [
            "env", f"PATH={bin_dir}:{os.environ['PATH']}", str(paths.TOOLS_BIN / "ct"), "install",
            "--config", str(paths.ROOT / "ct.yaml"), "--charts", str(chart), "--namespace", ns,
            "--release-label", "app.kubernetes.io/instance", "--helm-extra-args", "--timeout 900s",
        ],
        timeout=2400,
    )  # fmt: skip
    took = time.monotonic() - started
    print(f"[umbrella] ct install of {len(CT_SCENARIOS)} scenarios with Helm 4: {took:.0f} s")
    for line in output.splitlines():  # what ct did, for the log
        if line.startswith(("Installing chart with values file", "TEST SUITE:", "Phase:", " ✔︎", " ✖︎")):
            print(f"[ct] {line.strip()}")
    for name in CT_SCENARIOS:
        assert f"ci/{name}-values.yaml" in output, output[-4000:]
    # helm test's summary per install: the cpu scenario runs every check, tiers-off (no L2) the router's
    assert output.count("Phase:          Succeeded") >= 4, output[-6000:]
    assert "All charts installed successfully" in output, output[-4000:]
    releases = kube.kubectl("get", "secrets", "-n", ns, "-l", "owner=helm", "-o", "name")
    assert releases.strip() == "", f"ct left releases behind: {releases}"
