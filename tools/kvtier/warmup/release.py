"""`kvtier warm` against a release: run its warm-up hook Job again, now, and read the Job's report.

The Job is the one `helm install`/`helm upgrade` ran (read from Helm's own release record, a Secret of type
`helm.sh/release.v1`, so it is the manifest of the revision deployed, with its prefixes ConfigMap and
network policy in place), under a new name: the warm-up runs where the L2 claim is mounted and the engines
are reached the way the hook reaches them. Needs: get/list Secrets (the release record), create/get Jobs,
list Pods and get pods/log in the release namespace.
"""

from __future__ import annotations

import base64
import gzip
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from kvtier.errors import UserError

RELEASE_SECRET_TYPE = "helm.sh/release.v1"
COMPONENT = "l2-warmup"
HOOK_ANNOTATIONS = ("helm.sh/hook", "helm.sh/hook-weight", "helm.sh/hook-delete-policy")
POLL_S = 2.0
NAME_MAX = 63  # a Job's name is also a label value (job-name)


@dataclass(frozen=True)
class WarmupJob:
    model: str
    manifest: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.manifest["metadata"]["name"])


def decode_release(encoded: str) -> dict[str, Any]:
    """Helm's release record from a release Secret's `release` value (base64 as the API gives Secret
    data): Helm stores base64(gzip(JSON)) there."""
    raw = base64.b64decode(base64.b64decode(encoded))
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw)


def latest_release(api: Any, namespace: str, release: str) -> dict[str, Any]:
    """The newest revision's record (deployed or not: a failed warm-up leaves the upgrade failed, and the
    user re-runs it after the fix)."""
    secrets = api.list_namespaced_secret(namespace, label_selector=f"owner=helm,name={release}").items
    records = [s for s in secrets if s.type == RELEASE_SECRET_TYPE and (s.data or {}).get("release")]
    if not records:
        raise UserError(
            f"no Helm release {release!r} in namespace {namespace} (no Secret of type {RELEASE_SECRET_TYPE} "
            "labelled name={release}): check --release and -n/--namespace"
        )
    newest = max(records, key=lambda s: int((s.metadata.labels or {}).get("version", "0")))
    return decode_release(newest.data["release"])


def warmup_jobs(record: dict[str, Any], model: str | None = None) -> list[WarmupJob]:
    """The warm-up hook Jobs of a release record, one per model with prefixes."""
    jobs = []
    for hook in record.get("hooks") or []:
        if hook.get("kind") != "Job":
            continue
        manifest = yaml.safe_load(hook.get("manifest") or "")
        labels = (manifest or {}).get("metadata", {}).get("labels") or {}
        if labels.get("app.kubernetes.io/component") == COMPONENT:
            jobs.append(WarmupJob(str(labels.get("kv-tiered-inference/model", "")), manifest))
    release = record.get("name", "?")
    if not jobs:
        raise UserError(
            f"release {release} (revision {record.get('version', '?')}) has no warm-up Job: list prefixes in "
            "cache.warmup.prefixes.<model> and `helm upgrade` first (docs/warmup.md)"
        )
    if model is not None:
        chosen = [job for job in jobs if job.model == model]
        if not chosen:
            listed = ", ".join(sorted(job.model for job in jobs))
            raise UserError(f"--model {model}: release {release} warms {listed} only")
        return chosen
    return jobs


def rerun_manifest(job: WarmupJob, suffix: str) -> dict[str, Any]:
    """The hook Job as a plain Job under a new name (a hook annotation means nothing outside Helm)."""
    manifest = json.loads(json.dumps(job.manifest))
    metadata = manifest["metadata"]
    base = job.name[: NAME_MAX - len(suffix) - 1].rstrip("-")
    metadata["name"] = f"{base}-{suffix}"
    annotations = {k: v for k, v in (metadata.get("annotations") or {}).items() if k not in HOOK_ANNOTATIONS}
    metadata["annotations"] = {**annotations, "kvtier.dev/warm": "kvtier warm"}
    return manifest


@dataclass
class Finished:
    job: str
    succeeded: bool
    report: dict[str, Any] | None
    log_tail: str


def run_job(
    batch: Any, core: Any, namespace: str, manifest: dict[str, Any], log: Callable[[str], None]
) -> Finished:
    """Create the Job, wait for it to finish (its own activeDeadlineSeconds bounds it), read its report."""
    name = manifest["metadata"]["name"]
    batch.create_namespaced_job(namespace, manifest)
    log(f"job/{name} created in {namespace}; waiting (kubectl logs -f job/{name} -n {namespace})")
    deadline = time.monotonic() + int(manifest["spec"].get("activeDeadlineSeconds") or 1800) + 120
    while True:
        status = batch.read_namespaced_job_status(name, namespace).status
        if status.succeeded or status.failed:
            break
        if time.monotonic() >= deadline:
            raise UserError(f"job/{name} did not finish before its deadline: kubectl describe job/{name}")
        time.sleep(POLL_S)
    return Finished(name, bool(status.succeeded), *pod_log(core, namespace, name))


def pod_log(core: Any, namespace: str, job: str) -> tuple[dict[str, Any] | None, str]:
    """(the report, the log's last lines) of the Job's pod; a log that cannot be read says why."""
    from kubernetes.client import ApiException

    pods = core.list_namespaced_pod(namespace, label_selector=f"job-name={job}").items
    if not pods:
        return None, f"job/{job} has no pod left (kubectl describe job/{job})"
    pod = pods[0].metadata.name
    try:
        text = core.read_namespaced_pod_log(pod, namespace)
    except ApiException as error:
        return None, f"the log of pod {pod} could not be read: {error.status} {error.reason}"
    return last_report(text), "\n".join(text.splitlines()[-12:])


def last_report(text: str) -> dict[str, Any] | None:
    """The l2-warm JSON line a warm-up pod prints last."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                report = json.loads(line)
            except ValueError:
                continue
            if isinstance(report, dict) and report.get("check") == "l2-warm":
                return report
    return None
