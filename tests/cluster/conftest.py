"""Fixtures for tests against the real control plane (kube-apiserver + etcd + KWOK) on loopback.

`kube_cluster` (session) brings a cluster up once per session, or reuses a running one named by
KVTIER_TEST_CLUSTER in the test runs' state folder (tests/conftest.py); the last session using it takes down
a cluster that tests started (kvtier.cluster.kwok.sharing). KVTIER_KEEP_CLUSTER=1 leaves it running
(`KVTIER_STATE_DIR=~/.cache/kvtier/test-state kvtier cluster down --name N`).
Everything here talks to 127.0.0.1 only.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from harness import storage
from kvtier.cluster.common import binaries, crds, hyperpod
from kvtier.cluster.common.rest import ApiException, Rest
from kvtier.cluster.kwok import lifecycle, sharing

# Each session gets its own cluster (about 10 s to start once the binaries are cached), so sessions that run
# at the same time (CI jobs, engineers on one machine) never meet over cluster-wide objects such as the
# CSIDriver. KVTIER_TEST_CLUSTER=<name> shares a named one instead (with KVTIER_KEEP_CLUSTER=1, across runs).
SESSION_PREFIX = "kvtier-test-"
CLUSTER_NAME = os.environ.get("KVTIER_TEST_CLUSTER") or f"{SESSION_PREFIX}{os.getpid()}"
START_TIMEOUT = float(os.environ.get("KVTIER_CLUSTER_TIMEOUT", "300"))


@pytest.fixture(scope="session")
def kube_cluster_info(need) -> Iterator[lifecycle.ClusterInfo]:
    absent = binaries.missing()
    need(not absent, f"control-plane binaries not built ({', '.join(absent)}): run `make cluster-tools`")
    with sharing.shared(
        CLUSTER_NAME, START_TIMEOUT, keep=bool(os.environ.get("KVTIER_KEEP_CLUSTER"))
    ) as info:
        yield info


@pytest.fixture(scope="session")
def kube_cluster(kube_cluster_info: lifecycle.ClusterInfo) -> Path:
    """Path of a kubeconfig for the test cluster (server on 127.0.0.1, admin credentials)."""
    return kube_cluster_info.kubeconfig


@pytest.fixture(scope="session")
def kube_api(kube_cluster: Path) -> client.ApiClient:
    """An official `kubernetes` ApiClient for the test cluster (typed APIs: client.CoreV1Api(kube_api))."""
    return config.new_client_from_config(config_file=str(kube_cluster))


@pytest.fixture(scope="session")
def kube_rest(kube_api: client.ApiClient) -> Rest:
    """Plain-JSON requests to the test cluster (cluster.common.rest.Rest), sharing kube_api's connection."""
    return Rest(kube_api)


RBAC_WAIT = 60.0  # seconds for the authorizer's RBAC informers to see a new binding


@pytest.fixture(scope="session")
def wait_authorized(kube_rest: Rest) -> Callable[..., None]:
    """`wait_authorized(user, namespace, verb, resource, group="")` returns once the API server allows
    it. The authorizer reads RBAC from informers, so a binding just made takes a moment to count; a
    test that acts at once gets a 403 now and then."""

    def wait(user: str, namespace: str, verb: str, resource: str, group: str = "") -> None:
        attributes = {"namespace": namespace, "verb": verb, "group": group, "resource": resource}
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": user, "resourceAttributes": attributes},
        }
        reviews = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
        deadline = time.monotonic() + RBAC_WAIT
        while not kube_rest.post(reviews, review)["status"].get("allowed"):
            assert time.monotonic() < deadline, (
                f"{user} still may not {verb} {resource} after {RBAC_WAIT:.0f}s"
            )
            time.sleep(0.5)

    return wait


@pytest.fixture(scope="session")
def hyperpod_crds(kube_rest: Rest, hyperpod_crd_dir: Path) -> list[str]:
    """The HyperPod Inference Operator's CRDs as derived from AWS's SDK (newest operator version),
    installed; their names. No file from outside the repository is needed."""
    return hyperpod.install_crds(kube_rest, hyperpod_crd_dir)


@pytest.fixture(scope="session")
def operator_crds(kube_rest: Rest, need) -> list[str]:
    """KEDA's and the Prometheus Operator's CRDs from their Go modules (pinned in versions.env), installed:
    what environments with engine autoscaling, monitors and alerts need. No controller of theirs runs."""
    need(shutil.which("go") is not None, "Go is needed to fetch KEDA's and the Prometheus Operator's CRDs")
    return crds.install(kube_rest, crds.operators())


@pytest.fixture
def make_namespace(kube_rest: Rest) -> Iterator[Callable[..., str]]:
    """`make_namespace(name, enforce="restricted")`: new namespace `<name>-<4 hex>` with Pod Security labels.

    The API server's PodSecurity admission enforces `enforce`; `warn`/`audit` are always restricted, so
    anything less than restricted shows up as a warning. Deleted (not waited for) after the test.
    """
    created: list[str] = []

    def make(name: str, enforce: str = "restricted") -> str:
        # A random suffix: deleting a namespace takes a while, and the next test may want the same name.
        name = re.sub(r"[^a-z0-9-]", "-", name.lower())[:57].strip("-") + "-" + secrets.token_hex(2)
        labels = {
            f"pod-security.kubernetes.io/{mode}": level
            for mode, level in (("enforce", enforce), ("warn", "restricted"), ("audit", "restricted"))
        }
        labels |= {
            f"pod-security.kubernetes.io/{mode}-version": "latest" for mode in ("enforce", "warn", "audit")
        }
        kube_rest.post("/api/v1/namespaces", {"metadata": {"name": name, "labels": labels}})
        created.append(name)
        return name

    yield make
    for name in created:
        try:
            kube_rest.delete(f"/api/v1/namespaces/{name}")
        except ApiException as error:
            if error.status != 404:
                raise


@pytest.fixture
def static_pvs(kube_rest: Rest) -> Iterator[Callable[..., list[str]]]:
    """`static_pvs(owner, storage_class, count, size="10Ti")`: PVs for claims to bind to; removed after."""
    owners: set[str] = set()

    def make(owner: str, storage_class: str, count: int, size: str = "10Ti", claims=None) -> list[str]:
        owners.add(owner)
        return storage.create(kube_rest, owner, storage_class, count, size, claims)

    yield make
    for owner in owners:
        storage.delete(kube_rest, owner)
