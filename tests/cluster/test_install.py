"""Every values/ environment through a release's whole life on the real control plane, Helm 3 and 4.

install --wait, `helm test` as a lifecycle step, upgrade with changed values, rollback, uninstall with no
orphans (claims stay by design); and an upgrade from the previous chart version (the last tag, else HEAD~1).
Namespaces carry Pod Security labels the API server enforces: `privileged` only where Curvine's node
components run. KWOK runs no container: pods are scheduled and admitted for real and their processes are
faked. `helm test` here only shows that Helm creates every test hook, the API server admits it and KWOK's
stage marks it Succeeded (toolchain/kwok/stages.yaml): no check runs. The checks themselves run in
tests/unit (their logic) and tests/node (the scripts in real pods).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from harness import inventory
from kvtier import helm as kvtier_helm
from kvtier import paths
from kvtier.cluster.common import discovery
from kvtier.cluster.common.rest import Rest
from kvtier.preflight.inputs import effective_values

UMBRELLA = "kv-tiered-inference"
ENVS = sorted(paths.VALUES.glob("*.yaml"))
FLIP = {"prefixaware": "roundrobin"}  # routing.strategy used for "changed values" (valid for both targets)
# Kinds that make the API server (or a test) dial a pod, a ClusterIP or anything off loopback.
DIALS_OUT = {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "APIService"}


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(paths.ROOT), *args], capture_output=True, text=True, check=False)


def previous_ref() -> str | None:
    """The last release tag before HEAD, else HEAD~1; None when it holds no umbrella chart."""
    tag = _git("describe", "--tags", "--abbrev=0", "HEAD~1").stdout.strip()
    for ref in (tag, "HEAD~1"):
        if ref and _git("cat-file", "-e", f"{ref}:charts/{UMBRELLA}/Chart.yaml").returncode == 0:
            return ref
    return None


def _prepare(charts: Path, helm3: Path) -> Path:
    """Package the umbrella's file:// dependency next to it; returns the umbrella directory."""
    umbrella = charts / UMBRELLA
    built = subprocess.run(
        [str(helm3), "dependency", "build", str(umbrella), "--skip-refresh"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    return umbrella


@pytest.fixture(scope="module")
def helm3() -> Path:
    return paths.TOOLS_BIN / "helm3"


@pytest.fixture(scope="module")
def chart_now(tmp_path_factory: pytest.TempPathFactory, helm3: Path) -> Path:
    dest = tmp_path_factory.mktemp("now") / "charts"
    shutil.copytree(paths.CHARTS, dest, ignore=shutil.ignore_patterns("*.tgz", "Chart.lock"))
    return _prepare(dest, helm3)


@pytest.fixture(scope="module")
def chart_before(tmp_path_factory: pytest.TempPathFactory, helm3: Path) -> tuple[str, Path] | None:
    ref = previous_ref()
    if ref is None:
        return None
    dest = tmp_path_factory.mktemp("before")
    archive = subprocess.run(
        ["git", "-C", str(paths.ROOT), "archive", ref, "charts", "values"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return ref, _prepare(dest / "charts", helm3)


class Helm:
    """The pinned Helm of one major version, pointed at the test cluster."""

    def __init__(self, major: int, kubeconfig: Path, namespace: str) -> None:
        self.binary = paths.TOOLS_BIN / f"helm{major}"
        self.kubeconfig, self.namespace = kubeconfig, namespace

    def __call__(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(self.binary), "--kubeconfig", str(self.kubeconfig), "-n", self.namespace, *args],
            capture_output=True,
            text=True,
            timeout=600,
            stdin=subprocess.DEVNULL,
        )
        if ok:
            assert result.returncode == 0, (
                f"helm {' '.join(args)}:\n{result.stdout}\n{result.stderr}\n{self.state()}"
            )
        return result

    def state(self) -> str:
        """What the namespace holds, to explain a failed `--wait` (which object never got ready)."""
        objects = self.kubectl("get", "pods,pvc,deployments,statefulsets,daemonsets,jobs", "-o", "wide")
        events = self.kubectl("get", "events", "--sort-by=.lastTimestamp")
        return f"namespace {self.namespace}:\n{objects}\nevents:\n{events[-4000:]}"

    def kubectl(self, *args: str) -> str:
        kubectl = paths.TOOLS_BIN / "kubectl"
        result = subprocess.run(
            [str(kubectl), "--kubeconfig", str(self.kubeconfig), "-n", self.namespace, *args],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        return result.stdout + result.stderr

    def values(self, release: str, revision: int | None = None) -> dict:
        extra = ["--revision", str(revision)] if revision else []
        return json.loads(self("get", "values", release, "-o", "json", *extra).stdout) or {}

    def revision(self, release: str) -> int:
        return int(json.loads(self("status", release, "-o", "json").stdout)["version"])


def _render(helm: Helm, chart: Path, release: str, values: Path, rest: Rest) -> list[dict]:
    """What the release would create, rendered for this cluster's version and APIs."""
    rendered = kvtier_helm.Template(
        chart,
        release,
        [values],
        namespace=helm.namespace,
        kube_version=rest.get("/version")["gitVersion"],
        api_versions=discovery.api_versions_for_helm(rest),
    ).render()
    return [d for d in rendered.manifests if d.get("kind")]


def _setup(
    env: Path, major: int, kube_cluster: Path, make_namespace, prefix: str, request: pytest.FixtureRequest
) -> tuple[Helm, str]:
    values = effective_values(env)
    if values.get("target") == "hyperpod":
        request.getfixturevalue("hyperpod_crds")  # the operator's CRDs, derived from AWS's SDK (it is closed)
    if needs_operator_crds(values):
        request.getfixturevalue("operator_crds")  # KEDA's and the Prometheus Operator's, from their modules
    level = "privileged" if values.get("curvine", {}).get("enabled", True) else "restricted"
    namespace = make_namespace(f"{prefix}-{env.stem}-h{major}", enforce=level)
    helm = Helm(major, kube_cluster, namespace)
    release, rest = f"{prefix}{major}", request.getfixturevalue("kube_rest")

    def clean_up() -> None:  # after a failure too, so the next test can install the chart again
        helm("uninstall", release, "--no-hooks", "--timeout", "1m", ok=False)
        inventory.remove_cluster_scoped(rest, release, namespace)

    request.addfinalizer(clean_up)
    return helm, namespace


def needs_operator_crds(values: dict) -> bool:
    """Whether an environment renders KEDA or Prometheus Operator objects."""
    metrics = values.get("metrics") or {}
    monitors = [metrics.get(k) or {} for k in ("serviceMonitor", "podMonitor", "prometheusRule")]
    monitors.append((values.get("curvine") or {}).get("serviceMonitor") or {})
    autoscaling = (values.get("engine") or {}).get("autoscaling") or {}
    return bool(autoscaling.get("enabled")) or any(m.get("enabled") for m in monitors)


def _provide_storage(helm: Helm, chart: Path, release: str, values: Path, rest: Rest, static_pvs) -> None:
    """Static PVs for every claim the release makes (KWOK has no CSI driver to provision them)."""
    from harness.storage import claim_refs

    rendered = _render(helm, chart, release, values, rest)
    for storage_class, claims in claim_refs(rendered, helm.namespace).items():
        static_pvs(release, storage_class, len(claims), claims=claims)
    # An environment that brings its own RWX claim (values/cpu.yaml): the user's claim, made here as a user
    # would, bound to a static PV.
    l2 = effective_values(values)["cache"]["l2"]
    existing = l2["claim"].get("existingClaim") if l2.get("enabled") else ""
    claims_now = rest.get(f"/api/v1/namespaces/{helm.namespace}/persistentvolumeclaims")["items"]
    if existing and existing not in {c["metadata"]["name"] for c in claims_now}:
        claim = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": existing},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "resources": {"requests": {"storage": l2["claim"]["size"]}},
            },
        }
        rest.post(f"/api/v1/namespaces/{helm.namespace}/persistentvolumeclaims", claim)
        static_pvs(release, "", 1, claims=[(helm.namespace, existing)])


def _wait_no_orphans(rest: Rest, release: str, namespace: str, timeout: float = 120) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:  # the garbage collector and kwok's pod-gone stage need a moment
        left = inventory.leftovers(rest, release, namespace)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(2)


def _changed(values_file: Path) -> str:
    strategy = effective_values(values_file).get("routing", {}).get("strategy", "prefixaware")
    return f"routing.strategy={FLIP.get(strategy, 'prefixaware')}"


@pytest.mark.parametrize("env", ENVS, ids=[e.stem for e in ENVS])
def test_renders_nothing_that_dials_out(
    env: Path, chart_now: Path, kube_cluster: Path, kube_rest: Rest
) -> None:
    """No webhooks, APIServices or LoadBalancer Services: the API server never calls into the cluster."""
    helm = Helm(3, kube_cluster, "default")
    objects = _render(helm, chart_now, "probe", env, kube_rest)
    assert objects
    bad = [f"{o['kind']}/{o['metadata']['name']}" for o in objects if o["kind"] in DIALS_OUT]
    bad += [
        f"Service/{o['metadata']['name']}"
        for o in objects
        if o["kind"] == "Service" and o.get("spec", {}).get("type") == "LoadBalancer"
    ]
    assert not bad


@pytest.mark.parametrize("major", [3, 4])
@pytest.mark.parametrize("env", ENVS, ids=[e.stem for e in ENVS])
def test_release_lifecycle(
    env: Path,
    major: int,
    chart_now: Path,
    kube_cluster: Path,
    kube_rest: Rest,
    make_namespace,
    static_pvs,
    request: pytest.FixtureRequest,
    need,
) -> None:
    need((paths.TOOLS_BIN / f"helm{major}").exists(), f"pinned Helm {major} not built (make tools)")
    helm, namespace = _setup(env, major, kube_cluster, make_namespace, "life", request)
    release = f"life{major}"  # as _setup names it
    _provide_storage(helm, chart_now, release, env, kube_rest, static_pvs)

    helm("install", release, str(chart_now), "-f", str(env), "--wait", "--timeout", "5m")
    assert helm.revision(release) == 1
    _test_hooks_admitted(helm, release)

    change = _changed(env)
    helm("upgrade", release, str(chart_now), "-f", str(env), "--set", change, "--wait", "--timeout", "5m")
    value = change.split("=", 1)[1]
    assert helm.revision(release) == 2
    assert helm.values(release)["routing"]["strategy"] == value

    helm("rollback", release, "1", "--wait", "--timeout", "5m")
    assert helm.revision(release) == 3
    assert helm.values(release).get("routing", {}).get("strategy") != value

    _uninstall_cleanly(helm, kube_rest, release, namespace)


def _test_hooks_admitted(helm: Helm, release: str) -> None:
    """`helm test` on KWOK: Helm creates the release's test hooks, the API server admits them (Pod Security
    of the namespace included) and KWOK's pod-never-done stage marks them Succeeded. No container runs, so
    this says nothing about what the checks would find."""
    tested = helm("test", release, "--timeout", "5m")
    assert "Succeeded" in tested.stdout, tested.stdout


def _uninstall_cleanly(helm: Helm, rest: Rest, release: str, namespace: str) -> None:
    """`helm uninstall --wait` succeeds and leaves nothing behind but claims (kept by design)."""
    result = helm("uninstall", release, "--wait", "--timeout", "2m", ok=False)
    left = _wait_no_orphans(rest, release, namespace, timeout=120 if result.returncode == 0 else 5)
    stuck = [
        f"{c['metadata']['name']} (Terminating)"
        for c in rest.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims")["items"]
        if c["metadata"].get("deletionTimestamp")
    ]
    assert result.returncode == 0 and not left, (
        f"uninstall: {result.stderr.strip() or 'ok'}; left behind: {left}; claims stuck deleting: {stuck} "
        "(a completed pod that mounts a claim keeps it from being deleted until the pod is gone)"
    )


@pytest.mark.parametrize("major", [3, 4])
@pytest.mark.parametrize("env", ENVS, ids=[e.stem for e in ENVS])
def test_upgrade_from_previous_version(
    env: Path,
    major: int,
    chart_now: Path,
    chart_before,
    kube_cluster: Path,
    kube_rest: Rest,
    make_namespace,
    static_pvs,
    request: pytest.FixtureRequest,
    need,
) -> None:
    need((paths.TOOLS_BIN / f"helm{major}").exists(), f"pinned Helm {major} not built (make tools)")
    need(
        chart_before is not None,
        "no previous chart version: no release tag and HEAD~1 has no umbrella chart "
        "(a shallow clone has no HEAD~1: fetch with depth >= 2)",
    )
    ref, old_chart = chart_before
    old_values = old_chart.parent.parent / "values" / env.name
    if not old_values.is_file():
        # Not a missing prerequisite: the environment did not exist at ref, so there is no upgrade to run.
        # Only git's word counts; a file the archive should have held fails instead of skipping.
        absent = _git("cat-file", "-e", f"{ref}:values/{env.name}").returncode != 0
        assert absent, f"{ref}:values/{env.name} exists but is not at {old_values}"
        pytest.skip(f"environment {env.stem} is new since {ref}: nothing to upgrade from")
    helm, namespace = _setup(env, major, kube_cluster, make_namespace, "upg", request)
    release = f"upg{major}"  # as _setup names it
    _provide_storage(helm, old_chart, release, old_values, kube_rest, static_pvs)
    helm("install", release, str(old_chart), "-f", str(old_values), "--wait", "--timeout", "5m")

    helm(
        "upgrade",
        release,
        str(chart_now),
        "-f",
        str(env),
        "--set",
        _changed(env),
        "--wait",
        "--timeout",
        "5m",
    )
    history = json.loads(helm("history", release, "-o", "json").stdout)
    new_version = yaml.safe_load((chart_now / "Chart.yaml").read_text())["version"]
    assert [h["revision"] for h in history] == [1, 2] and history[-1]["status"] == "deployed"
    assert history[-1]["chart"] == f"{UMBRELLA}-{new_version}", f"upgraded from {history[0]['chart']} ({ref})"
    _test_hooks_admitted(helm, release)
    _uninstall_cleanly(helm, kube_rest, release, namespace)


STAND_IN_CV = """#!/bin/bash
# Stand-in for Curvine's `cv report` (Curvine cannot run here): the report format of v0.4.1's
# curvine-cli/src/cmds/report.rs, with the live workers given by the test.
printf '%20s: %s\\n' live_worker_num "$LIVE" lost_worker_num "$LOST"
printf '%20s: %s\\n' live_worker_list "worker-a:8997,10GB/20GB (50.00%)"
printf '%20s: %s\\n' lost_worker_list "$LOST_HOST:8997"
"""


def _test_workers_script(helm: Helm, release: str) -> tuple[str, str, str]:
    """The rendered script of the test-workers hook, its ServiceAccount and its DaemonSet."""
    hooks = yaml.safe_load_all(helm("get", "hooks", release).stdout)
    [pod] = [h for h in hooks if h and h["metadata"]["name"].endswith("-test-workers")]
    script = pod["spec"]["containers"][0]["args"][0]
    daemonset = next(line.split("/", 1)[1] for line in script.splitlines() if line.startswith("ds="))
    return script, pod["spec"]["serviceAccountName"], daemonset


def _wait_allowed(rest: Rest, user: str, namespace: str, daemonset: str, timeout: float = 60) -> None:
    """Until RBAC's informers let `user` get that one DaemonSet (a Role with resourceNames: the review
    must name it)."""
    attributes = {"namespace": namespace, "verb": "get", "group": "apps", "resource": "daemonsets"}
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": user, "resourceAttributes": {**attributes, "name": daemonset}},
    }
    deadline = time.monotonic() + timeout
    while not rest.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", review)["status"].get(
        "allowed"
    ):
        assert time.monotonic() < deadline, f"{user} still may not get daemonset {daemonset} after {timeout}s"
        time.sleep(0.5)


# Environments that run Curvine (values/cpu.yaml brings its own RWX claim instead).
CURVINE_ENVS = [e for e in ENVS if effective_values(e)["curvine"].get("enabled", True)]


@pytest.mark.parametrize("env", CURVINE_ENVS, ids=[e.stem for e in CURVINE_ENVS])
def test_workers_check_reads_what_was_scheduled(
    env: Path,
    chart_now: Path,
    kube_cluster: Path,
    kube_rest: Rest,
    make_namespace,
    static_pvs,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    """test-workers' own Role lets it read exactly the worker DaemonSet: its rendered script, run here
    against the real API server with the ServiceAccount's token (only `cv` is a stand-in), passes when
    the live workers match what the cluster scheduled on the reference topology and names the lost
    workers when one is missing."""
    helm, namespace = _setup(env, 3, kube_cluster, make_namespace, "wrk", request)
    release = "wrk3"  # as _setup names it
    _provide_storage(helm, chart_now, release, env, kube_rest, static_pvs)
    helm("install", release, str(chart_now), "-f", str(env), "--wait", "--timeout", "5m")
    script, account, daemonset = _test_workers_script(helm, release)
    status = kube_rest.get(f"/apis/apps/v1/namespaces/{namespace}/daemonsets/{daemonset}")["status"]
    scheduled = status["desiredNumberScheduled"]
    assert scheduled >= 1, f"{env.stem}: no worker scheduled on the reference topology ({status})"

    _wait_allowed(kube_rest, f"system:serviceaccount:{namespace}:{account}", namespace, daemonset)
    token = kube_rest.post(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 600},
        },
    )["status"]["token"]
    secrets_dir = tmp_path / "sa"
    secrets_dir.mkdir()
    (secrets_dir / "token").write_text(token)
    shutil.copy(kube_rest.api.configuration.ssl_ca_cert, secrets_dir / "ca.crt")
    stand_in = tmp_path / "cv"
    stand_in.write_text(STAND_IN_CV)
    stand_in.chmod(0o755)
    local = (
        script.replace("/tmp/api.err", str(tmp_path / "api.err"))
        .replace("/tmp/cv.err", str(tmp_path / "cv.err"))
        .replace("sa=/var/run/secrets/kubernetes.io/serviceaccount", f"sa={secrets_dir}")
        .replace("/app/curvine/bin/cv", str(stand_in))
    )
    host, port = kube_rest.host.removeprefix("https://").rsplit(":", 1)

    def run(live: int, deadline_s: int) -> subprocess.CompletedProcess[str]:
        text = local.replace("deadline=$((SECONDS + ", f"deadline=$((SECONDS + {deadline_s} + 0 * ")
        env_vars = {"PATH": "/usr/bin:/bin", "KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}
        env_vars |= {"LIVE": str(live), "LOST": "1", "LOST_HOST": "10.9.8.7"}
        return subprocess.run(["bash", "-c", text], capture_output=True, text=True, timeout=60, env=env_vars)

    healthy = run(scheduled, 30)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert f"DaemonSet {namespace}/{daemonset} scheduled {scheduled}" in healthy.stdout
    short = run(scheduled - 1, 0)
    assert short.returncode == 1, short.stdout + short.stderr
    assert f"expected {scheduled} (DaemonSet {namespace}/{daemonset} scheduled {scheduled}" in short.stdout
    assert "lost workers (registered once, no heartbeat now): 10.9.8.7" in short.stdout

    # The token reads that one DaemonSet and nothing else.
    for path in (
        f"/apis/apps/v1/namespaces/{namespace}/daemonsets",
        f"/apis/apps/v1/namespaces/{namespace}/daemonsets/{daemonset.replace('-worker', '-csi-node')}",
        f"/api/v1/namespaces/{namespace}/pods",
    ):
        denied = subprocess.run(
            [
                "curl",
                "-sS",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--cacert",
                str(secrets_dir / "ca.crt"),
                "-H",
                f"Authorization: Bearer {token}",
                f"{kube_rest.host}{path}",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert denied.stdout == "403", f"{path}: {denied.stdout} {denied.stderr}"
    _uninstall_cleanly(helm, kube_rest, release, namespace)


def test_switching_the_cache_backend_is_an_upgrade_that_keeps_the_l2_claim(
    chart_now: Path,
    kube_cluster: Path,
    kube_rest: Rest,
    make_namespace,
    static_pvs,
    request: pytest.FixtureRequest,
) -> None:
    """The reference environment on LMCache, upgraded to `cache.backend: vllm-native` (and back): the same
    claim (its data) stays bound, the eviction job's live list moves to the new backend's namespace, and the
    engines carry the native connector; the test hooks are admitted on both (KWOK runs none of them)."""
    env = paths.VALUES / "prod-g6e-4xlarge.yaml"
    helm, namespace = _setup(env, 3, kube_cluster, make_namespace, "bk", request)
    release = "bk3"  # as _setup names it
    _provide_storage(helm, chart_now, release, env, kube_rest, static_pvs)
    helm("install", release, str(chart_now), "-f", str(env), "--wait", "--timeout", "5m")
    claims = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"

    def state() -> tuple[dict[str, str], str, str]:
        bound = {c["metadata"]["name"]: c["metadata"]["uid"] for c in kube_rest.get(claims)["items"]}
        live = kube_rest.get(f"/api/v1/namespaces/{namespace}/configmaps/{release}-{UMBRELLA}-l2-eviction")
        engines = kube_rest.get(f"/apis/apps/v1/namespaces/{namespace}/deployments")["items"]
        args = next(
            d["spec"]["template"]["spec"]["containers"][0]["args"]
            for d in engines
            if d["metadata"]["labels"].get("app.kubernetes.io/component") == "engine"
        )
        return bound, live["data"]["live-namespaces.txt"], args[args.index("--kv-transfer-config") + 1]

    before = state()
    native = ["--set", "cache.backend=vllm-native", "--set", "cache.hashAlgorithm=sha256"]
    helm("upgrade", release, str(chart_now), "-f", str(env), *native, "--wait", "--timeout", "5m")
    after = state()
    assert after[0] == before[0], "the upgrade replaced a claim: the L2 data would be gone"
    assert after[1] != before[1], "the live namespace list still names LMCache's namespace"
    assert '"OffloadingConnector"' in after[2] and '"SaltTaggedLMCacheConnectorV1"' in before[2]
    _test_hooks_admitted(helm, release)
    helm("rollback", release, "1", "--wait", "--timeout", "5m")
    assert state() == before
