"""Fixtures for the real-node tier: a cluster whose pods run real processes (kvtier.cluster.realnode).

`real_cluster` (session) starts one cluster for the session inside its own network namespace and takes
it down at the end; `kube` runs kubectl inside that namespace. The tier needs a machine that can run a
node (root, `ip`, `nsenter`, cgroup v1 hierarchies: README.md, Tests) and the node programs (`make
node-tools`). Either missing skips the tier with the reason, except under CI, where it fails and names
what is missing: CI must never lose the tier without a red run.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from kvtier import helm, paths
from kvtier.cluster.realnode import curvine_binaries, curvine_release, images, nodebins, umbrella_cpu
from kvtier.cluster.realnode import lifecycle as realnode
from kvtier.cluster.realnode.client import Kube
from kvtier.engine_rig import rig as engine_rig
from kvtier.engine_rig.errors import RigError

START_TIMEOUT = float(os.environ.get("KVTIER_CLUSTER_TIMEOUT", "300"))


@pytest.fixture(scope="session")
def node_programs(need) -> None:
    reasons = realnode.preconditions()
    need(not reasons, "this machine cannot run the real-node tier: " + "; ".join(reasons))
    absent = nodebins.missing()
    need(not absent, f"real-node programs not built ({', '.join(absent)}): run `make node-tools`")


SESSION_PREFIX = "node-test-"


def _remove_abandoned() -> None:
    """Take down clusters of test sessions that died without their teardown (killed, crashed): each named
    `node-test-<pid>`, or `node-test-<pid>-<suffix>` for a module's own cluster."""
    root = realnode.clusters_dir()
    for folder in sorted(root.glob(f"{SESSION_PREFIX}*")) if root.is_dir() else []:
        pid = folder.name.removeprefix(SESSION_PREFIX).split("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            realnode.down(folder.name, progress=lambda m: print(f"[real-node] {m}"))


@contextmanager
def _own_cluster(suffix: str, nodes: int = 1) -> Iterator[realnode.RealCluster]:
    """A real-node cluster of this session's own, `node-test-<pid><suffix>`, taken down at the end; clusters
    of sessions that died are taken down first."""
    _remove_abandoned()
    name = f"{SESSION_PREFIX}{os.getpid()}{suffix}"

    def log(message: str) -> None:
        print(f"[{name}] {message}")

    cluster = realnode.up(name, timeout=START_TIMEOUT, progress=log, nodes=nodes)
    try:
        yield cluster
    finally:
        realnode.down(name, progress=log)


@pytest.fixture(scope="session")
def own_cluster(node_programs) -> Callable[..., AbstractContextManager[realnode.RealCluster]]:
    """For a module that needs a cluster of its own: `with own_cluster("-two", nodes=2) as cluster:`."""
    return _own_cluster


@contextmanager
def _spread_curvine(kube: Kube, prefix: str) -> Iterator[curvine_release.Installed]:
    """charts/curvine laid out as production runs it on a two-node cluster (install(spread=True)), release
    `<prefix>-<pid>`, removed at the end."""
    with curvine_release.raised_pipe_max_size():
        installed = curvine_release.install(
            kube, f"{prefix}-{os.getpid()}", lambda m: print(f"[curvine] {m}"), spread=True
        )
        try:
            yield installed
        finally:
            # The tests' own pods first: one a failure left behind would hold the chart's claim.
            ours = "!app.kubernetes.io/instance"
            kube.kubectl("delete", "pods", "-n", installed.namespace, "-l", ours, "--wait=false", check=False)
            curvine_release.remove(kube, installed)


@pytest.fixture(scope="session")
def spread_curvine(need) -> Callable[[Kube, str], AbstractContextManager[curvine_release.Installed]]:
    """For a module with a two-node cluster of its own: `with spread_curvine(kube, "curvine2") as installed:`.
    Needs the Curvine binaries (KVTIER_CURVINE_BIN or ../shared beside the checkout)."""
    reason = curvine_binaries.missing()
    need(not reason, reason)
    return _spread_curvine


@pytest.fixture(scope="session")
def engine_image_in(need) -> Callable[[realnode.RealCluster], str]:
    """`engine_image_in(cluster)`: the engine image (the engine venv on a Debian base, built once per venv)
    imported into every node of `cluster`; its reference."""
    try:
        venv = engine_rig.engine_python().parent.parent
    except RigError as error:
        need(False, f"engine venv unavailable: {error}")

    def imported(cluster: realnode.RealCluster) -> str:
        image = images.engine(lambda m: print(f"[engine-image] {m}"), venv.resolve())
        umbrella_cpu.import_into_every_node(cluster, [image], print)
        return image.ref

    return imported


@pytest.fixture(scope="session")
def real_cluster(node_programs) -> Iterator[realnode.RealCluster]:
    with _own_cluster("") as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kube(real_cluster: realnode.RealCluster) -> Kube:
    return Kube(real_cluster)


@pytest.fixture(scope="session")
def curvine(kube: Kube, need) -> Iterator[curvine_release.Installed]:
    """charts/curvine installed once per session on the session's cluster (kvtier.cluster.realnode.
    curvine_release): its StorageClass serves the umbrella's L2 claim. Needs the Curvine binaries
    (KVTIER_CURVINE_BIN or ../shared beside the checkout)."""
    reason = curvine_binaries.missing()
    need(not reason, reason)
    with curvine_release.raised_pipe_max_size():
        installed = curvine_release.install(kube, f"curvine-{os.getpid()}", lambda m: print(f"[curvine] {m}"))
        try:
            yield installed
        finally:
            curvine_release.remove(kube, installed)


@pytest.fixture(scope="session")
def l2_storage_class(request) -> str:
    """The StorageClass of the umbrella's L2 claim: Curvine's (the `curvine` fixture) wherever its binaries
    are, and always under CI, where missing binaries fail that fixture; "" elsewhere without them, and
    the umbrella's L2 is a hostPath stand-in (said once, with the reason)."""
    reason = curvine_binaries.missing()
    if reason and not os.environ.get("CI"):
        print(f"[umbrella] L2 on a hostPath stand-in, not Curvine: {reason}")
        return ""
    return request.getfixturevalue("curvine").storage_class


@pytest.fixture(scope="session")
def kube_client() -> type[Kube]:
    """`kube_client(cluster)`: kubectl and Helm for a cluster a test starts itself."""
    return Kube


@pytest.fixture
def namespace(kube: Kube) -> Iterator[Callable[[str], str]]:
    """`namespace(prefix)`: a new namespace `<prefix>-<4 hex>`, deleted (not waited for) after the test."""
    made: list[str] = []

    def make(prefix: str) -> str:
        name = re.sub(r"[^a-z0-9-]", "-", prefix.lower())[:50].strip("-") + "-" + secrets.token_hex(2)
        kube.kubectl("create", "namespace", name)
        made.append(name)
        return name

    yield make
    for name in made:
        kube.kubectl("delete", "namespace", name, "--wait=false", check=False)


UMBRELLA = paths.CHARTS / "kv-tiered-inference"


def _image_values(prefix: str, image: str) -> list[str]:
    """--set arguments pointing `<prefix>.image` at a locally built image, never pulled."""
    values = images.chart_image_values(image)
    return [arg for key, value in values.items() for arg in ("--set", f"{prefix}.image.{key}={value}")]


@pytest.fixture(scope="session")
def render_umbrella() -> Callable[..., list[dict]]:
    """`render_umbrella(namespace, templates, images={"router": ref}, values="cpu.yaml")`: the umbrella's
    objects from those templates (templates/<name>.yaml), as the chart renders them for that environment,
    with each `<key>.image` pointing at a local image."""

    def render(
        namespace: str, templates: list[str], images: dict[str, str], values: str = "cpu.yaml"
    ) -> list[dict]:
        helm.build_dependencies(UMBRELLA)
        overlay = [arg for prefix, image in images.items() for arg in _image_values(prefix, image)]
        overlay += [arg for template in templates for arg in ("--show-only", f"templates/{template}.yaml")]
        return (
            helm.Template(UMBRELLA, "kv", [paths.VALUES / values], overlay=overlay, namespace=namespace)
            .render()
            .manifests
        )

    return render


@pytest.fixture(scope="session")
def hostpath_claim() -> Callable[[str, str, Path, str], list[dict]]:
    """`hostpath_claim(namespace, name, path, size)`: a hostPath PersistentVolume and its RWX claim."""
    return umbrella_cpu.hostpath_claim
