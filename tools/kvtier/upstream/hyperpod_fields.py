"""HyperPod Inference Operator CRD fields the bundle writes (templates/hyperpod-inferenceendpointconfig.yaml).

Data for `kvtier preflight`: an operator whose CRD lacks one of these (or no longer accepts a value the
bundle uses) would silently prune or refuse what the chart renders. Paths are dotted, below the version's
openAPIV3Schema; `[]` steps into array items. A test keeps this list equal to what the chart renders.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CRD_NAME = "inferenceendpointconfigs.inference.sagemaker.aws.amazon.com"
GROUP = "inference.sagemaker.aws.amazon.com"
VERSION = "v1"
KIND = "InferenceEndpointConfig"
PLURAL = "inferenceendpointconfigs"

# Operator versions the bundle renders for (hyperpod.operator.version), oldest first. What changed, from
# aws/sagemaker-hyperpod-cli: 3.2 is chart 2.2.2 (the CRD in ../shared); v3.7 (PR #464, 2026-09) added
# `tolerations` and `lmcache.mode` (InProcess | MultiProcess: a co-located LMCache server sidecar, which
# needs LMCache >= 0.5.0) to InferenceEndpointConfig. docs/hyperpod.md has the table.
OPERATOR_VERSIONS = ("3.2", "3.3", "3.4", "3.5", "3.6", "3.7")
NEWEST = OPERATOR_VERSIONS[-1]
TOLERATIONS_SINCE = "3.7"
MULTIPROCESS_SINCE = "3.7"
MULTIPROCESS_MIN_LMCACHE = (0, 5, 0)
LMCACHE_MODES = ("InProcess", "MultiProcess")
# PR #464 names the field `lmcache.mode` on InferenceEndpointConfig; neither the SDK (3.12.0 has no such
# model) nor any published CRD shows its exact place, so the bundle writes it at spec.lmcache.mode.
LMCACHE_MODE_PATH = "spec.lmcache.mode"


def version_key(version: str) -> tuple[int, ...]:
    """ "3.7" -> (3, 7), for comparing operator versions."""
    return tuple(int(part) for part in version.split("."))


@dataclass(frozen=True)
class Field:
    path: str  # dotted path below openAPIV3Schema
    type: str  # the OpenAPI type the bundle writes
    why: str  # what the bundle uses it for
    values: tuple[str, ...] = ()  # values the bundle writes that the CRD must accept (enum or pattern)
    since: str = OPERATOR_VERSIONS[0]  # first operator version whose CRD has it


FIELDS: tuple[Field, ...] = (
    Field("spec.modelName", "string", "model name, = models[].name"),
    Field("spec.instanceType", "string", "models[].instanceType (ml.*)"),
    Field("spec.replicas", "integer", "models[].replicas"),
    Field("spec.invocationEndpoint", "string", "hyperpod.invocationEndpoint"),
    Field(
        "spec.modelSourceConfig.modelSourceType",
        "string",
        "models[].source kind",
        ("huggingface", "s3", "fsx"),
    ),
    Field("spec.modelSourceConfig.modelLocation", "string", "S3 prefix / FSx path of the model"),
    Field("spec.modelSourceConfig.huggingFaceModel.modelId", "string", "models[].model (org/name)"),
    Field("spec.modelSourceConfig.huggingFaceModel.commitSHA", "string", "source.huggingface.revision"),
    Field("spec.modelSourceConfig.huggingFaceModel.tokenSecretRef.name", "string", "HF token Secret"),
    Field("spec.modelSourceConfig.huggingFaceModel.tokenSecretRef.key", "string", "HF token Secret key"),
    Field("spec.modelSourceConfig.s3Storage.bucketName", "string", "source.s3.bucket"),
    Field("spec.modelSourceConfig.s3Storage.region", "string", "source.s3.region"),
    Field("spec.modelSourceConfig.fsxStorage.fileSystemId", "string", "source.fsx.fileSystemId"),
    Field("spec.modelSourceConfig.fsxStorage.dnsName", "string", "source.fsx.dnsName"),
    Field("spec.modelSourceConfig.fsxStorage.mountName", "string", "source.fsx.mountName"),
    Field("spec.worker.image", "string", "hyperpod.worker.image"),
    Field("spec.worker.args", "array", "vLLM arguments (model path, prefix caching, sizes, extraArgs)"),
    Field("spec.worker.resources", "object", "models[].resources + nvidia.com/gpu"),
    Field("spec.worker.modelInvocationPort.containerPort", "integer", "hyperpod.worker.port"),
    Field("spec.worker.modelInvocationPort.name", "string", "port name", ("http",)),
    Field("spec.worker.modelVolumeMount.name", "string", "hyperpod.worker.modelVolumeName"),
    Field("spec.worker.modelVolumeMount.mountPath", "string", "hyperpod.worker.modelMountPath"),
    Field("spec.kvCacheSpec.enableL1Cache", "boolean", "cache.l1.enabled"),
    Field("spec.kvCacheSpec.enableL2Cache", "boolean", "cache.l2.enabled"),
    Field(
        "spec.kvCacheSpec.l2CacheSpec.l2CacheBackend",
        "string",
        "placeholder backend; the admission patch replaces it",
        ("tieredstorage", "redis"),
    ),
    Field("spec.kvCacheSpec.l2CacheSpec.l2CacheLocalUrl", "string", "hyperpod.l2CachePlaceholder.localUrl"),
    Field("spec.intelligentRoutingSpec.enabled", "boolean", "the operator's router (always on)"),
    Field(
        "spec.intelligentRoutingSpec.routingStrategy",
        "string",
        "routing.strategy",
        ("prefixaware", "kvaware", "session", "roundrobin"),
    ),
    Field("spec.loadBalancer.healthCheckPath", "string", "hyperpod.healthCheckPath"),
    Field("spec.tolerations", "array", "hyperpod.tolerations", since=TOLERATIONS_SINCE),
    Field(
        LMCACHE_MODE_PATH,
        "string",
        "hyperpod.lmcache.mode (rendered for MultiProcess only)",
        ("MultiProcess",),
        since=MULTIPROCESS_SINCE,
    ),
)


def fields_for(operator_version: str) -> tuple[Field, ...]:
    """The fields an operator of this version has (those the bundle may render for it)."""
    return tuple(f for f in FIELDS if version_key(f.since) <= version_key(operator_version))


def lookup(schema: dict[str, Any], path: str) -> dict[str, Any] | None:
    """The sub-schema at a dotted path of an openAPIV3Schema, or None where the CRD lacks it."""
    node: dict[str, Any] | None = schema
    for step in path.split("."):
        is_array = step.endswith("[]")
        name = step.removesuffix("[]")
        node = (node or {}).get("properties", {}).get(name)
        if node is not None and is_array:
            node = node.get("items")
        if node is None:
            return None
    return node
