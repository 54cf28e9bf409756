"""Rules of the HyperPod target on the pod the operator would run: its Deployment as built from the rendered
endpoint (kvtier.upstream.hyperpod_operator's facts), with the chart's L2 patch applied as the API server
would (kvtier.validate.checks.hyperpod_pod). Certain harm is an error; what hangs on a fact no public source
states is a warning that names the fact.
"""

from __future__ import annotations

from collections.abc import Iterator

from kvtier.validate.checks import hyperpod_pod
from kvtier.validate.rules import Hit, ManifestsContext, rule


def _hits(ctx: ManifestsContext, topic: str) -> Iterator[Hit]:
    endpoints, patch = hyperpod_pod.endpoints_and_patch(ctx.manifests)
    for endpoint in endpoints:
        subject = f"{endpoint['kind']}/{(endpoint.get('metadata') or {}).get('name')}"
        # Without an L2 patch (L2 off) the operator's pod is still judged: its worker fields matter.
        for issue in hyperpod_pod.judge(endpoint, patch or hyperpod_pod.Patch("", "")):
            if issue.topic != topic:
                continue
            unknown = f" (decided by an unpublished fact: {issue.fact.what})" if issue.fact else ""
            yield Hit(
                issue.message + unknown,
                subject=subject,
                manifest_path=issue.path,
                severity=issue.severity,
            )


@rule(
    "hyperpod-l2-volume-name",
    reason="the operator names the pod's model volume after spec.worker.modelVolumeMount.name; an L2 patch "
    "volume of the same name merges into it (volumes merge by name), giving one volume two sources, which "
    "the API server refuses, so the operator's Deployment is never written",
    remedy="give hyperpod.patch.volumeName and hyperpod.worker.modelVolumeName different names (defaults: "
    "kvtier-l2cache and model-weights)",
    scope="manifests",
)
def l2_volume_name(ctx: ManifestsContext) -> Iterator[Hit]:
    yield from _hits(ctx, "volume")


@rule(
    "hyperpod-l2-mount-path",
    reason="the operator mounts the model at spec.worker.modelVolumeMount.mountPath (/opt/ml/model) and vLLM "
    "loads it from there; an L2 mount at that path replaces the model's mount (mounts merge by path), and "
    "one under it needs a mount point inside the model volume",
    remedy="mount the L2 outside the model's path: cache.l2.mountPath (default /mnt/curvine/l2cache) neither "
    "equal to nor under hyperpod.worker.modelMountPath, nor above it",
    scope="manifests",
)
def l2_mount_path(ctx: ManifestsContext) -> Iterator[Hit]:
    yield from _hits(ctx, "mount")


@rule(
    "hyperpod-l2-patch-env",
    reason="the L2 patch removes the operator's HyperPod L2 variables by name and sets its own; a name the "
    "operator does not set removes nothing (a typo leaves the operator's variable in force), and a variable "
    "the endpoint sets that the patch owns never reaches the model server",
    remedy="list in hyperpod.patch.removeEnv only variables the operator sets (check `kubectl get deploy "
    "<endpoint> -o yaml`), and leave the patch's variables out of the endpoint",
    scope="manifests",
)
def l2_patch_env(ctx: ManifestsContext) -> Iterator[Hit]:
    yield from _hits(ctx, "env")


@rule(
    "hyperpod-worker-fields-delivered",
    reason="the operator builds the worker container from the CRD's spec.worker fields only; any other key "
    "is pruned by the API server (structural schema) and never reaches the pod",
    remedy="put environment variables in spec.worker.environmentVariables and arguments in spec.worker.args "
    "(for the chart: models[].extraArgs)",
    scope="manifests",
)
def worker_fields_delivered(ctx: ManifestsContext) -> Iterator[Hit]:
    yield from _hits(ctx, "fields")
