"""Rules the charts enforce themselves: each template `fail` starts with `[rule-id] key.path: `.

A check that a template can say (a refusal on the values alone) lives once, in the chart, so Helm, Argo CD
and `kvtier validate` refuse the same values with the same words. This module declares those rules for the
catalogue (`--list-rules`, docs/validate.md) and reads a refusal back: the id names the catalogue entry (its
reason and remedy), the key path the values key and so the user's file and line (provenance). Python keeps
what a template cannot say: warnings, checks across objects or against the cluster.
tests/charts/test_chart_rule_ids.py holds every `fail` in both charts to an id declared here or by a values
rule of the same meaning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvtier.validate.rules import declare

SUBCHART_KEYS = {"curvine": "curvine"}  # a subchart's key paths sit under its name in the umbrella's values

declare(
    "backend-target",
    reason="the HyperPod Inference Operator renders the engines itself and knows only LMCache's connector: "
    "vLLM's native offloading cannot be configured through it",
    remedy="use cache.backend: lmcache on target hyperpod, or target: standalone for vllm-native",
)
declare(
    "backend-l2-needs-l1",
    reason="vLLM's fs tier is a secondary tier of the CPU tier: every chunk is written from, and read into, "
    "a CPU-tier slot, so there is no L2 without L1",
    remedy="set cache.l1.enabled: true with cache.backend vllm-native (or turn L2 off)",
)
declare(
    "backend-record-hits",
    reason="the L2 hit recorder is an LMCache storage plugin: vLLM's native fs tier never loads it, so "
    "eviction would wait for hit records that never come",
    remedy="set cache.l2.eviction.recordHits: false with cache.backend vllm-native (eviction then goes by "
    "write time)",
)
declare(
    "backend-hash-algorithm",
    reason="cache.hashAlgorithm names the backend's prefix hash: LMCache's pre_caching_hash_algorithm or "
    "vLLM's --prefix-caching-hash-algo; each refuses the other's names at start",
    remedy="with lmcache use builtin, sha256, sha256_cbor or sha256_cbor_64bit; with vllm-native use sha256 "
    "(vLLM's default), sha256_cbor, xxhash or xxhash_cbor",
)
declare(
    "l2-writable-by-engines",
    reason="curvine-fuse enforces the L2 directory's owner and mode (curvine-cli records its own UID/GID and "
    "0777 & ~umask for each new volume directory; the mount uses default_permissions): engines that cannot "
    "write it lose every L2 write while all pods stay healthy",
    remedy="set curvine.csi.volumeAccess.uid to engine.podSecurityContext.runAsUser and gid to its fsGroup "
    "(or mode: world to let any UID write)",
)
declare(
    "router-static-workers",
    reason="with static discovery the router knows only the URLs listed for a model: a model without an "
    "entry has no worker, and every request to it fails",
    remedy="add router.discovery.staticWorkers.<model>: [{url: http://host:port}], or use Kubernetes "
    "discovery",
)
declare(
    "router-static-kv-events",
    reason="kvaware routing learns where KV blocks are from each worker's KV-event stream: a static worker "
    "without its kvEvents endpoint is never credited with a block",
    remedy="give every static worker kvEvents: tcp://host:<engine.kvEventsPort>, or use prefixaware routing",
)
declare(
    "warmup-target",
    reason="the warm-up Job sends prefixes to the engine pods behind the Service the chart renders and "
    "waits for their chunks on the shared L2 claim: on target hyperpod the operator renders the engines, "
    "and without L2 each replica's cache is its own, so there is nothing shared to warm",
    remedy="leave cache.warmup.prefixes empty on target hyperpod or with cache.l2.enabled: false",
)
declare(
    "warmup-model",
    reason="the warm-up lists prefixes per model by models[].name: a key that names no model, or a model "
    "with 0 replicas, has no replica to send them through, so the hook would wait out its timeout",
    remedy="key cache.warmup.prefixes by a models[].name that has replicas, or remove the key",
)
declare(
    "hyperpod-patch-api",
    reason="the L2 volume reaches the operator's Deployments through a MutatingAdmissionPolicy (or Kyverno): "
    "without the API the chart would install an endpoint whose pods never mount the L2",
    remedy="serve admissionregistration.k8s.io MutatingAdmissionPolicy (default on Kubernetes >= 1.36), set "
    "hyperpod.patch.apiVersion when rendering offline, or hyperpod.patch.mechanism: kyverno",
)
declare(
    "hyperpod-multiprocess-patch",
    reason="the LMCache server sidecar of MultiProcess mode gets its --l2-adapter argument from the "
    "MutatingAdmissionPolicy patch; the Kyverno alternative covers InProcess only",
    remedy="serve MutatingAdmissionPolicy (Kubernetes >= 1.36), or use hyperpod.lmcache.mode: InProcess",
)
declare(
    "hyperpod-revision-sha",
    reason="the operator pins a Hugging Face model by commitSHA, a full 40-character commit: a branch or tag "
    "is refused",
    remedy="set models[].source.huggingface.revision to the commit's full SHA",
)
declare(
    "hyperpod-instance-type",
    reason="the chart renders each HyperPod endpoint for one instance type (InferenceEndpointConfig "
    "spec.instanceType; the list form, instanceTypes, is not rendered): a model without one has no endpoint",
    remedy="set models[].instanceType to the HyperPod instance type, e.g. ml.g6e.4xlarge",
)
declare(
    "model-source-target",
    reason="each target loads weights its own way: the HyperPod operator from Hugging Face, S3 or FSx; "
    "standalone engines from Hugging Face or a claim",
    remedy="use source.huggingface or source.pvc on target standalone; source.huggingface, source.s3 or "
    "source.fsx on target hyperpod",
)
declare(
    "cpu-engine-one-rank",
    reason="vLLM's CPU engines here run tensor parallel size 1 and take no GPU: a GPU count or resource on "
    "a CPU engine either never schedules or idles",
    remedy="set gpusPerReplica: 1 and drop nvidia.com/gpu from the model's resources, or set "
    "engine.accelerator: nvidia",
)
declare(
    "gpu-resource-from-tp",
    reason="the chart sets nvidia.com/gpu from gpusPerReplica (the tensor parallel size): a different count "
    "leaves GPUs idle or ranks without a GPU",
    remedy="drop nvidia.com/gpu from the model's resources and set gpusPerReplica",
)
declare(
    "image-reference",
    reason="every container image is pinned: an image without a tag or a digest would be pulled as latest, "
    "whatever that is on the day a node starts the pod",
    remedy="set the image's tag (or digest); a `tag: null` in a values file deletes the chart's default tag",
)
declare(
    "routing-strategy",
    reason="the router's policy is chosen by routing.strategy: a name outside the four the chart knows has "
    "no vllm-router policy",
    remedy="set routing.strategy to prefixaware, kvaware, session or roundrobin",
)
declare(
    "quantity-format",
    reason="the chart sizes L1, /dev/shm and the eviction watermark from Kubernetes quantities: anything "
    "else cannot be converted to bytes",
    remedy="write a size such as 110Gi, 96G or 1024Mi",
)
declare(
    "l1-auto-needs-memory-limit",
    reason="cache.l1.size auto is the memory limit minus /dev/shm and headroom: without a limit there is "
    "nothing to size L1 from",
    remedy="set the model's resources.limits.memory, or a number of GB in cache.l1.size",
)
declare(
    "engine-env-reserved",
    reason="the chart sets the cross-pod invariants (hash seed, LMCache's settings) as environment variables "
    "of every engine: an extraEnv item of the same name would make one model's pods stop sharing chunks",
    remedy="set the cache.* value the chart renders the variable from, not engine.extraEnv",
)
declare(
    "prometheusrule-eviction-period",
    reason="the eviction alerts compare counters over one eviction period: the chart must know it as a "
    "duration",
    remedy="set metrics.prometheusRule.evictionPeriod to a duration such as 5m, 1h or 1d",
)
declare(
    "api-served",
    reason="an enabled feature whose API the cluster does not serve would render to nothing (or be refused "
    "at install): ScaledObject needs KEDA, PrometheusRule the Prometheus Operator",
    remedy="install the API's operator first, or set <feature>.assumeApiServed: true when rendering without "
    "a cluster",
)
declare(
    "autoscaling-target",
    reason="on target hyperpod the engines belong to the operator: a ScaledObject would fight its scaling",
    remedy="use the InferenceEndpointConfig's autoScalingSpec (hyperpod.*) and leave engine.autoscaling off",
)
declare(
    "autoscaling-fixed-replicas",
    reason="kvaware routing with Kubernetes discovery lists each replica's KV-event endpoint at install "
    "time, so the replica count cannot change under it",
    remedy="use routing.strategy prefixaware, or router.discovery.mode static, with engine.autoscaling",
)
declare(
    "autoscaling-prometheus-address",
    reason="KEDA scales the engines on a Prometheus query: without the server's URL the ScaledObject never "
    "becomes ready",
    remedy="set engine.autoscaling.prometheusAddress, e.g. http://prometheus-operated.monitoring:9090",
)
declare(
    "replica-range",
    reason="an autoscaler whose minimum is above its maximum is refused by the API server (HPA) or never "
    "scales (KEDA)",
    remedy="set minReplicas <= maxReplicas",
)
declare(
    "curvine-csi-controller-identity",
    reason="the CSI controller creates every volume directory as its own UID/GID: its identity is "
    "csi.volumeAccess, which the engines' write access is checked against",
    remedy="set csi.volumeAccess.uid/gid (curvine.csi.volumeAccess in the umbrella), not the controller's "
    "podSecurityContext",
)
declare(
    "curvine-data-dirs-unique",
    reason="two Curvine data dirs on one path count the same disk twice: the pool reports capacity it does "
    "not have and fills the disk",
    remedy="give each worker.dataDirs entry its own path",
)
declare(
    "curvine-read-chunk-cap",
    reason="Curvine v0.4.1 workers refuse a read whose chunk is above 16 MiB or, with prefetch on "
    "(chunkNum > 1), whose chunk size x chunk count is (curvine-worker read_handler.rs MAX_READ_AHEAD): "
    "every cross-node read would fail",
    remedy="keep curvine.config.read.chunkSize x chunkNum at 16MB or less (the chart's default: 1MB x 8)",
)


@dataclass(frozen=True)
class Refusal:
    rule: str  # the rule id, or "" when the message carries none (a template error, not a `fail`)
    key: str  # the values key path as the user writes it (a subchart's under its name); "" if none
    message: str  # the refusal from the key path on


_TAGGED = re.compile(r"\[([a-z0-9][a-z0-9-]*)\] ([^\s:]+): (.*)", re.S)


def read_refusal(message: str, template: str = "") -> Refusal:
    """A chart's `fail` message, split into rule id, key path and text; `template`, the file Helm names
    (`kv-tiered-inference/charts/curvine/templates/...`), places a subchart's key under its name."""
    tagged = _TAGGED.match(message.strip())
    if not tagged:
        return Refusal("", "", message.strip())
    rule_id, key, text = tagged.groups()
    parts = template.split("/")
    if len(parts) > 2 and parts[1] == "charts" and parts[2] in SUBCHART_KEYS:
        key = f"{SUBCHART_KEYS[parts[2]]}.{key}"
    return Refusal(rule_id, key, f"{key}: {text}")


__all__ = ["Refusal", "read_refusal"]
