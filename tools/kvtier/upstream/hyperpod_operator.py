"""What the HyperPod Inference Operator puts into the Deployment it renders from an InferenceEndpointConfig.

The operator is closed source: these facts come from its CRD's field descriptions, AWS's SDK, the samples of
its Helm chart and the reference deployment (/work/shared/DESIGN.md section 5). Every fact names its source;
where no public source says it, the fact is `known=False` and the rules that need it warn instead of refusing
(kvtier.validate.checks.hyperpod_pod). Data only: the pod is built in kvtier.validate.checks.hyperpod_pod.
"""

from __future__ import annotations

from dataclasses import dataclass

# Sources, named once. The operator chart's files are at aws/sagemaker-hyperpod-cli
# helm_chart/HyperPodHelmChart/charts/inference-operator/ (operator chart 2.2.2, app 3.2).
CLI_REPO = "https://github.com/aws/sagemaker-hyperpod-cli"
CHART_DIR = "helm_chart/HyperPodHelmChart/charts/inference-operator"
CRD = (
    f"{CLI_REPO} {CHART_DIR}/config/crd/inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml "
    "@ 011ca927123e02b35a399935bbb3ab1905fe33c7 (= ../shared/fixtures/hyperpod-inference-operator/"
    "inferenceendpointconfigs.crd.yaml)"
)
SDK = "PyPI sagemaker-hyperpod (the version toolchain/versions.env pins)"
SDK_MODEL = f"{SDK}, sagemaker/hyperpod/inference/config/hp_endpoint_config.py (ModelVolumeMount, Worker)"
SDK_CONSTANTS = f"{SDK}, sagemaker/hyperpod/inference/config/constants.py (DEFAULT_MOUNT_PATH)"
SAMPLE_K8S_VOLUME = (
    f"{CLI_REPO} {CHART_DIR}/config/samples/v1_nvme_k8s_volume.yaml "
    "@ 944712e1d1293713e116e042ddfe857cb45d0730"
)
SAMPLE_L1_L2 = (
    f"{CLI_REPO} {CHART_DIR}/config/samples/v1_s3_llama70b_IR_L1_L2_membrain.yaml "
    "@ a8d5724b16257a3f201e9eac356918a4942a8c85"
)
REFERENCE = (
    "the reference deployment's rendered Deployment (/work/shared/DESIGN.md section 5; docs/hyperpod.md)"
)


@dataclass(frozen=True)
class Fact:
    what: str  # what the operator does, in a sentence
    source: str  # where it is said (file + commit/tag, or URL)
    known: bool = True  # False: no public source says it; the rules warn and name this fact


# --- the worker container -----------------------------------------------------------------------------
WORKER_CONTAINER = Fact(
    "the model server container is named like the endpoint (and the Deployment), first in the pod",
    REFERENCE,
)
# --- the model volume ---------------------------------------------------------------------------------
MODEL_MOUNT_DEFAULT = "/opt/ml/model"
MODEL_MOUNT = Fact(
    "the model volume is mounted in the worker container at spec.worker.modelVolumeMount.mountPath "
    f"(default {MODEL_MOUNT_DEFAULT}), where the model server loads the model from",
    f"{CRD} (worker.modelVolumeMount.mountPath: description and default); {SDK_MODEL}; {SDK_CONSTANTS}",
)
MODEL_VOLUME_NAME = Fact(
    "the pod volume holding the model is named spec.worker.modelVolumeMount.name (the sample with "
    "modelSourceType kubernetesVolume supplies it as spec.kubernetes.volumes[] of that name)",
    f"{CRD} (worker.modelVolumeMount.name: 'Name of the model volume mount', required); {SAMPLE_K8S_VOLUME}",
)
MODEL_VOLUME_SOURCE = Fact(
    "which volume source the operator gives the model volume for huggingface / s3 / fsx sources (an "
    "emptyDir filled by an init container, a PVC of the S3 or FSx CSI driver, ...)",
    "not published (operator closed source); check `kubectl get deploy <endpoint> -o yaml`",
    known=False,
)
MODEL_MOUNT_READ_ONLY = Fact(
    "whether the model volume is mounted read-only (a mount point under it must then already exist)",
    "not published (operator closed source)",
    known=False,
)
EXTRA_VOLUMES = Fact(
    "spec.kubernetes.volumes[] are added to the pod spec under their own names",
    f"{CRD} (spec.kubernetes.volumes: 'Additional volumes to add to the pod spec')",
)
OTHER_VOLUMES = Fact(
    "the names of any further volumes the operator adds for its sidecars (reverse proxy, OpenTelemetry "
    "collector, TLS certificates, the LMCache server)",
    "not published (operator closed source)",
    known=False,
)
# --- environment and arguments --------------------------------------------------------------------------
WORKER_ENV = Fact(
    "spec.worker.environmentVariables[] are set in the worker container (and cannot be updated later)",
    f"{CRD} (worker.environmentVariables: 'List of environment variables to set in the container. Cannot "
    f"be updated.'); {SAMPLE_L1_L2} (PYTHONHASHSEED given there)",
)
WORKER_ARGS = Fact(
    "spec.worker.args are the worker container's args (the model path first: the images run `vllm serve`), "
    "spec.worker.command its command",
    f"{CRD} (worker.args, worker.command); {SAMPLE_K8S_VOLUME}",
)
HF_TOKEN = Fact(
    "the Hugging Face token of tokenSecretRef reaches only the init container (HF_TOKEN), never the worker",
    f"{CRD} (modelSourceConfig.huggingFaceModel.tokenSecretRef: description)",
)
L2_ENV = Fact(
    "for kvCacheSpec.l2CacheSpec.l2CacheBackend tieredstorage the worker gets LMCACHE_REMOTE_URL="
    "sagemaker-hyperpod://$(NODE_IP):9200 and LMCACHE_EXTRA_CONFIG (HyperPod's own), and no PYTHONHASHSEED",
    f"{REFERENCE}; observed, not published",
)
OTHER_ENV = Fact(
    "any other variable the operator sets in the worker (or, in MultiProcess mode, the LMCache server "
    "sidecar)",
    "not published (operator closed source)",
    known=False,
)
SIDECAR_MOUNTS = Fact(
    "which volumes the operator mounts in its LMCache server sidecar (MultiProcess mode), the model's "
    "included",
    "not published (operator closed source; docs/hyperpod.md 'Operator versions')",
    known=False,
)

# Variables the operator is known to set in the worker for an L2 backend (L2_ENV).
OPERATOR_L2_ENV = ("LMCACHE_REMOTE_URL", "LMCACHE_EXTRA_CONFIG")
# The worker fields of the CRD: what the operator reads from spec.worker. Anything else under worker is not
# in the structural schema, so the API server prunes it and the operator never sees it (CRD, worker).
WORKER_FIELDS = (
    "args",
    "command",
    "environmentVariables",
    "image",
    "modelInvocationPort",
    "modelVolumeMount",
    "probes",
    "requestLimits",
    "resources",
    "workingDir",
)
WORKER_FIELDS_SOURCE = CRD

FACTS: tuple[Fact, ...] = (
    WORKER_CONTAINER,
    MODEL_MOUNT,
    MODEL_VOLUME_NAME,
    MODEL_VOLUME_SOURCE,
    MODEL_MOUNT_READ_ONLY,
    EXTRA_VOLUMES,
    OTHER_VOLUMES,
    WORKER_ENV,
    WORKER_ARGS,
    HF_TOKEN,
    L2_ENV,
    OTHER_ENV,
    SIDECAR_MOUNTS,
)
