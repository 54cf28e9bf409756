"""The API server's own judgement of a render: every object applied with server-side dry run.

Each rendered object goes to a real API server as a server-side apply with `dryRun=All` and strict field
validation, so every rule the server enforces is enforced in its own words: validation (requests vs
limits, cron schedules, names, ports), defaulting, admission (Pod Security on the namespace's labels) and,
when the object already exists (an installed release), the update rules: immutable selectors, claim
sizes that only grow. Nothing is written.

A finding names the values key that produced the refused field when it can be traced (the field's value,
or the value the server quotes, found in the environment file), and the manifest path otherwise.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import urllib3

from kvtier.cluster.common import binaries, discovery, names
from kvtier.cluster.common.rest import ApiException, Rest
from kvtier.cluster.kwok import lifecycle, sharing
from kvtier.errors import UserError
from kvtier.validate.findings import SERVER, Finding
from kvtier.validate.inputs.loader import Loaded
from kvtier.validate.options import CLUSTER_DEFAULT, CLUSTER_ENV, IDLE_DEFAULT_S, IDLE_ENV

FIELD_MANAGER = "kvtier-validate"
LOCAL_TIMEOUT = 300.0
PARALLEL_DRY_RUNS = 8


@dataclass
class Judge:
    """One API server and namespace; discovery is read once per run."""

    rest: Rest
    namespace: str
    where: str  # "context prod" or "the local control plane": said in the summary
    local: bool = False  # a control plane of our own: its namespace may be written to
    _kinds: dict[tuple[str, str], discovery.Resource | None] = field(default_factory=dict)

    def resource(self, api_version: str, kind: str) -> discovery.Resource | None:
        key = (api_version, kind)
        if key not in self._kinds:
            served = discovery.resources(self.rest, api_version)
            for r in served:
                self._kinds.setdefault((api_version, r.kind), r)
            self._kinds.setdefault(key, None)
        return self._kinds[key]

    def _path(self, manifest: dict[str, Any], resource: discovery.Resource) -> str:
        """URL of the object a manifest names (in its own namespace, else the judged one)."""
        meta = manifest.get("metadata") or {}
        namespace = meta.get("namespace") or self.namespace
        base = resource.namespaced_path(namespace) if resource.namespaced else resource.path
        return f"{base}/{meta.get('name')}"

    def delete(self, manifest: dict[str, Any]) -> None:
        resource = self.resource(str(manifest.get("apiVersion")), str(manifest.get("kind")))
        if resource is not None:
            try:
                self.rest.delete(self._path(manifest, resource))
            except ApiException as error:
                if error.status != 404:
                    raise

    def namespace_exists(self) -> bool:
        return self.rest.find(f"/api/v1/namespaces/{self.namespace}") is not None

    def apply(self, manifest: dict[str, Any], dry_run: bool = True) -> dict[str, Any] | None:
        """None when the server accepts the object, else its Status (or a stand-in for a kind it lacks)."""
        api_version, kind = str(manifest.get("apiVersion")), str(manifest.get("kind"))
        resource = self.resource(api_version, kind)
        if resource is None:
            return {"reason": "NotServed", "message": f"{api_version} {kind} is not served by this cluster"}
        try:
            self.rest.request(
                "PATCH",
                self._path(manifest, resource),
                json.dumps(manifest),
                content_type="application/apply-patch+yaml",
                query={
                    "fieldManager": FIELD_MANAGER,
                    "force": "true",
                    "fieldValidation": "Strict",
                    **({"dryRun": "All"} if dry_run else {}),
                },
            )
        except ApiException as error:
            try:
                status = json.loads(error.body or "{}")
            except ValueError:
                status = {"message": str(error.body)}
            return status if isinstance(status, dict) else {"message": str(status)}
        return None


def unavailable(kube_context: str | None) -> str:
    """Why no API server can judge without being asked for ("" when one can): the default mode dry-runs
    on --context's cluster, else on the local control plane when its binaries are built."""
    if kube_context or lifecycle.running():
        return ""
    return _not_built()


def _not_built() -> str:
    """What to build when the local control plane's binaries are missing ("" when they are there)."""
    absent = binaries.missing()
    if absent:
        return (
            f"no --context, and the local control plane is not built ({', '.join(absent)}): run "
            "`make cluster-tools` (or give --context) for the API server's verdicts"
        )
    return ""


def local_cluster() -> str:
    """The local control plane a run starts when `kvtier cluster up` is not running: $KVTIER_VALIDATE_CLUSTER,
    else kvtier-validate."""
    name = os.environ.get(CLUSTER_ENV) or CLUSTER_DEFAULT
    if not names.valid(name):
        raise UserError(f"{CLUSTER_ENV}={name!r}: expected {names.RULE} (e.g. {CLUSTER_DEFAULT})")
    return name


def idle_seconds() -> float:
    """How long a local control plane a run started stays up for the next run (0: stopped at once)."""
    raw = os.environ.get(IDLE_ENV, str(IDLE_DEFAULT_S))
    try:
        return max(float(raw), 0.0)
    except ValueError:
        raise UserError(
            f"{IDLE_ENV}={raw!r}: expected a number of seconds, e.g. 900 (0 stops at once)"
        ) from None


@contextmanager
def connect(
    namespace: str,
    kube_context: str | None = None,
    kubeconfig: str | None = None,
    pod_security: dict[str, str] | None = None,
) -> Iterator[Judge]:
    """The user's cluster (`kube_context`), else the local control plane: the one `kvtier cluster up`
    runs, or one this run starts (kube-apiserver + etcd on loopback), left up for the next run until it
    has been idle for idle_seconds(). On the local one the namespace is created, with the --pod-security
    level as its enforce label."""
    if kube_context:
        yield Judge(Rest.from_kubeconfig(kubeconfig, kube_context), namespace, f"context {kube_context}")
        return
    if lifecycle.running():
        yield local_judge(
            lifecycle.rest(lifecycle.DEFAULT_NAME), namespace, pod_security, "the running local cluster"
        )
        return
    if why := _not_built():
        raise UserError(f"--server: {why}")
    idle = idle_seconds()
    name = local_cluster()
    with sharing.shared(name, LOCAL_TIMEOUT, keep=idle > 0) as info:
        if idle > 0:
            from kvtier.cluster.kwok import idle as watcher

            watcher.spawn(name, idle)
        kept = f" (kept up {idle:.0f}s idle)" if idle > 0 and info.started else ""
        where = "a local control plane" + kept
        yield local_judge(Rest.from_kubeconfig(info.kubeconfig), namespace, pod_security, where)


def local_judge(rest: Rest, namespace: str, pod_security: dict[str, str] | None, where: str) -> Judge:
    labels = {}
    level = (pod_security or {}).get(namespace)
    if level:
        labels = {"pod-security.kubernetes.io/enforce": level}
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": labels}}
    rest.request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}",
        json.dumps(body),
        content_type="application/apply-patch+yaml",
        query={"fieldManager": FIELD_MANAGER, "force": "true"},
    )
    _install_hyperpod_crds(rest)
    _install_operator_crds(rest)
    return Judge(rest, namespace, f"{where} ({rest.host})", local=True)


def _install_hyperpod_crds(rest: Rest) -> None:
    """The HyperPod operator's CRDs as derived from AWS's SDK, so the local server judges the
    InferenceEndpointConfigs too; without the SDK venv they stay absent (a warning per object says so)."""
    from kvtier.cluster.common import hyperpod
    from kvtier.upstream import hyperpod_crd

    with tempfile.TemporaryDirectory(prefix="kvtier-crds-") as folder:
        try:
            hyperpod_crd.write(Path(folder))
            hyperpod.install_crds(rest, Path(folder))
        except (UserError, TimeoutError, ApiException):
            return  # the endpoints' rows then say their kind is not served


def _install_operator_crds(rest: Rest) -> None:
    """KEDA's, the Prometheus Operator's and Gateway API's CRDs (their Go modules, pinned), so the local
    server judges ScaledObjects, PrometheusRules, monitors and HTTPRoutes too; without Go they stay absent
    (each row says so)."""
    from kvtier.cluster.common import crds

    try:
        crds.install(rest, crds.operators())
    except (UserError, TimeoutError, ApiException):
        return


def judge(
    judge: Judge, manifests: list[dict[str, Any]], loaded: Loaded, file: str
) -> tuple[list[Finding], str]:
    """Findings for the objects the server refuses, and a summary of what was judged; an API server that
    does not answer (or refuses kvtier itself) is a clear error, not a traceback."""
    try:
        return _judge(judge, manifests, loaded, file)
    except (OSError, urllib3.exceptions.HTTPError) as error:
        raise UserError(f"--server: the API server at {judge.rest.host} did not answer: {error}") from None
    except ApiException as error:
        raise UserError(
            f"--server: the API server at {judge.rest.host} refused kvtier itself ({error.status} "
            f"{error.reason}): the credentials need get on namespaces and discovery, and patch (dry run) "
            "on every kind the chart renders"
        ) from None


def _judge(
    judge: Judge, manifests: list[dict[str, Any]], loaded: Loaded, file: str
) -> tuple[list[Finding], str]:
    namespaced_ok = judge.namespace_exists()
    findings: list[Finding] = []
    # The ServiceAccount admission plugin refuses a pod whose account does not exist yet, and a dry run
    # creates none: on our own control plane the release's accounts are created for real (and removed
    # after); on a user's cluster a pod that waits for one the release creates is not a finding.
    accounts = [m for m in manifests if m.get("kind") == "ServiceAccount" and m.get("apiVersion") == "v1"]
    created = [m for m in accounts if judge.local and namespaced_ok and judge.apply(m, dry_run=False) is None]
    released = {str((m.get("metadata") or {}).get("name")) for m in accounts}
    try:
        # Discovery first (it fills the judge's cache), then the dry runs side by side: each is one
        # request the server answers in milliseconds, so a file's objects cost one round of them.
        judged_here = [
            m
            for m in manifests
            if not (
                (r := judge.resource(str(m.get("apiVersion")), str(m.get("kind")))) is not None
                and r.namespaced
                and not namespaced_ok
            )
        ]
        judged = len(judged_here)
        with ThreadPoolExecutor(max_workers=PARALLEL_DRY_RUNS) as pool:
            statuses = list(pool.map(judge.apply, judged_here))
        for manifest, status in zip(judged_here, statuses, strict=True):
            if status is not None and not _waits_for_account(status, released):
                findings += list(_findings(status, manifest, loaded, file))
    finally:
        for account in created:
            judge.delete(account)
    detail = f"{judged} objects on {judge.where}"
    if not namespaced_ok:
        detail += f"; namespace {judge.namespace!r} does not exist there, its objects not judged"
    return findings, detail


def _waits_for_account(status: dict[str, Any], released: set[str]) -> bool:
    match = re.search(r'serviceaccount "([^"]+)" not found', str(status.get("message")))
    return bool(match and match.group(1) in released)


def _findings(
    status: dict[str, Any], manifest: dict[str, Any], loaded: Loaded, file: str
) -> Iterator[Finding]:
    subject = f"{manifest.get('kind')}/{(manifest.get('metadata') or {}).get('name')}"
    reason = str(status.get("reason") or "Invalid")
    if reason == "NotServed":
        yield Finding(
            SERVER,
            "server.not-served",
            str(status.get("message")),
            file,
            subject=subject,
            severity="warning",
            suggestion="install the CRD that serves it (or validate against a cluster that has it)",
        )
        return
    causes = (status.get("details") or {}).get("causes") or [{"message": status.get("message"), "field": ""}]
    for cause in causes:
        field_path = str(cause.get("field") or "")
        message = _brief(str(cause.get("message") or status.get("message") or reason))
        yield Finding(  # the pipeline traces field_path to the values key (provenance.retarget)
            SERVER,
            f"server.{cause.get('reason') or reason}",
            f"{field_path}: {message}" if field_path else message,
            file,
            path=field_path,
            subject=subject,
            suggestion="change the value the API server refuses (its words above); the key is the values key "
            "that produced the field where kvtier could trace it",
        )


def _brief(message: str, keep: int = 320) -> str:
    """The server quotes a refused object whole (a volumeClaimTemplates list runs to kilobytes): its start
    and its verdict, which ends the message, are what a reader needs."""
    if len(message) <= keep:
        return message
    return f"{message[: keep // 2]} ... {message[-keep // 2 :]}"


__all__ = ["SERVER", "Judge", "connect", "judge"]
