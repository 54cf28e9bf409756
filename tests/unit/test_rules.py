"""Every cross-field rule over values: one case that triggers it and one that passes it."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.hub_stand_in import StandInHub, go_online, shipped_config
from kvtier import toolchain
from kvtier.upstream import vllm_options
from kvtier.validate import catalogue
from kvtier.validate.inputs import loader
from kvtier.validate.rules import ValuesContext

FIXTURES = Path(__file__).parents[1] / "fixtures" / "values"
GOOD = loader.load(FIXTURES / "good-minimal.yaml").data
Mutation = Callable[[dict[str, Any]], None]
LMCACHE = toolchain.versions()["LMCACHE_VERSION"]


def _set(*path: Any, value: Any) -> Mutation:
    def mutate(values: dict[str, Any]) -> None:
        node = values
        for key in path[:-1]:
            node = node.setdefault(key, {}) if isinstance(key, str) else node[key]
        node[path[-1]] = value

    return mutate


def _model(**changes: Any) -> Mutation:
    def mutate(values: dict[str, Any]) -> None:
        values["models"][0].update(changes)

    return mutate


def _second_model(**changes: Any) -> Mutation:
    def mutate(values: dict[str, Any]) -> None:
        values["models"].append({**copy.deepcopy(values["models"][0]), "name": "second", **changes})

    return mutate


def _both(*mutations: Mutation) -> Mutation:
    def mutate(values: dict[str, Any]) -> None:
        for m in mutations:
            m(values)

    return mutate


def _nothing(values: dict[str, Any]) -> None:
    return None


def _hyperpod(version: str, **settings: Any) -> Mutation:
    """target hyperpod for an operator of `version`, with hyperpod.<key> settings."""

    def mutate(values: dict[str, Any]) -> None:
        values["target"] = "hyperpod"
        hyperpod = values.setdefault("hyperpod", {})
        hyperpod["operator"] = {"version": version}
        hyperpod.update(copy.deepcopy(settings))

    return mutate


MULTIPROCESS = {"lmcache": {"mode": "MultiProcess"}}
NATIVE = _set("cache", "backend", value="vllm-native")


KEY = {"name": "kv-key"}
# A load balancer with a TLS certificate, open to one range: nothing left for router-exposed-checks to name.
CLOSED_LB = {
    "type": "LoadBalancer",
    "annotations": {"service.beta.kubernetes.io/aws-load-balancer-ssl-cert": "arn:aws:acm:x"},
    "loadBalancerSourceRanges": ["10.0.0.0/8"],
}


# rule id -> (a mutation that passes, a mutation that triggers, text the message must contain)
CASES: dict[str, tuple[Mutation, Mutation, str]] = {
    "hyperpod-operator-supports": (
        _hyperpod("3.7", tolerations=[{"key": "k", "operator": "Exists"}], **MULTIPROCESS),
        _hyperpod("3.6", **MULTIPROCESS),
        "MultiProcess needs operator >= 3.7",
    ),
    "hyperpod-multiprocess-lmcache": (
        _hyperpod("3.7", worker={"image": {"tag": "v0.5.0"}}, **MULTIPROCESS),
        _hyperpod("3.7", worker={"image": {"tag": "v0.4.7"}}, **MULTIPROCESS),
        "is LMCache < 0.5.0",
    ),
    "crosspod-hash-seed": (
        _set("cache", "hashSeed", value="42"),
        _set("cache", "hashSeed", value="random"),
        "hash prefixes differently",
    ),
    "crosspod-no-override": (
        _set("engine", "extraEnv", value=[{"name": "HF_HOME", "value": "/cache"}]),
        _set("engine", "extraEnv", value=[{"name": "PYTHONHASHSEED", "value": "1"}]),
        "PYTHONHASHSEED",
    ),
    "crosspod-same-model": (
        _second_model(replicas=1),
        _second_model(dtype="bfloat16"),
        "differs from models[0]",
    ),
    "l1-fits-memory": (
        _set("cache", "l1", "size", value=40),  # 64Gi - 8Gi /dev/shm - 16Gi headroom (chart defaults)
        _set("cache", "l1", "size", value=41),
        "does not fit models[0]'s memory limit",
    ),
    "tp-equals-gpus": (
        _model(
            gpusPerReplica=2,
            extraArgs=["--tensor-parallel-size=2"],
            resources={"limits": {"memory": "64Gi", "nvidia.com/gpu": 2}},
        ),
        _model(extraArgs=["--tensor-parallel-size", "2"]),
        "--tensor-parallel-size 2 != gpusPerReplica 1",
    ),
    "l2-rwx-claim": (
        _set("cache", "l2", "claim", value={"existingClaim": "shared"}),
        _set("cache", "l2", "claim", value={"storageClassName": "x"}),
        "neither claim.size",
    ),
    "l2-backend": (
        _set("cache", "l2", "claim", "storageClassName", value="efs-rwx"),
        _set("curvine", "enabled", value=False),
        "curvine.enabled is false",
    ),
    "curvine-masters-odd": (
        _set("curvine", "master", "replicas", value=5),
        _set("curvine", "master", "replicas", value=4),
        "even number",
    ),
    "curvine-masters-unchanged": (
        _nothing,
        _set("curvine", "master", "replicas", value=5),
        "differs from the deployed release's 3",
    ),
    "curvine-workers-on-gpu-nodes": (
        _set("curvine", "worker", "nodeSelector", value={}),
        _set("curvine", "worker", "tolerations", value=[]),
        "curvine workers do not",
    ),
    "hostpath-absolute": (
        _set("curvine", "worker", "dataDirs", 0, "path", value="/data/nvme0"),
        _set("curvine", "worker", "dataDirs", 0, "path", value="data/../nvme0"),
        "not an absolute, normalised path",
    ),
    "curvine-web-ports": (
        _set("curvine", "worker", "ports", "web", value=9002),
        _set("curvine", "worker", "ports", "web", value=9000),
        "both 9000",
    ),
    "tests-kept-pods-hold-the-claim": (
        _both(
            _set("tests", "deleteSucceededPods", value=False),
            _set("cache", "l2", "claim", "existingClaim", value="shared-l2"),
        ),
        _set("tests", "deleteSucceededPods", value=False),
        "while the chart creates the L2 claim itself",
    ),
    "secrets-not-inline": (
        _model(source={"huggingface": {"tokenSecret": {"name": "hf", "key": "token"}}}),
        _model(source={"huggingface": {"token": "hf_abc"}}),
        "literal secret",
    ),
    "api-key-not-inline": (
        _model(extraArgs=["--api-key", "$(VLLM_API_KEY)"]),
        _model(extraArgs=["--enforce-eager", "--api_key=sk-live-123"]),
        "models[0].extraArgs[1] '--api_key=...' sets --api-key to a literal key",
    ),
    "secret-env-not-inline": (
        _set(
            "engine",
            "extraEnv",
            value=[{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "t"}}}],
        ),
        _set("engine", "extraEnv", value=[{"name": "HF_TOKEN", "value": "hf_abc"}]),
        "engine.extraEnv[0] sets HF_TOKEN to a literal value",
    ),
    "networkpolicy-metrics-scraper": (
        _both(
            _set("metrics", "podMonitor", value={"enabled": True}),
            _set("networkPolicy", value={"metricsFrom": [{"namespaceSelector": {}}]}),
        ),
        _both(
            _set("metrics", "podMonitor", value={"enabled": True}),
            _set("networkPolicy", value={"enabled": True}),
        ),
        "metrics.podMonitor on, but networkPolicy.metricsFrom is empty",
    ),
    "networkpolicy-node-cidrs": (
        _set("curvine", "networkPolicy", value={"nodeCIDRs": ["10.0.0.0/16"]}),
        _set("curvine", "networkPolicy", value={"nodeCIDRs": []}),  # the baseline's workers: hostNetwork
        "curvine.worker.hostNetwork is true, but curvine.networkPolicy.nodeCIDRs is empty",
    ),
    "router-exposed-api-key": (
        _both(_set("router", "service", "type", value="NodePort"), _set("auth", "apiKeySecret", value=KEY)),
        _set("router", "service", "type", value="NodePort"),
        "router.service.type NodePort (the port opens on every node) exposes the router without an API key",
    ),
    "router-exposed-checks": (
        _both(_set("router", "service", value=CLOSED_LB), _set("auth", "apiKeySecret", value=KEY)),
        _both(_set("router", "service", "type", value="NodePort"), _set("auth", "apiKeySecret", value=KEY)),
        "router.service.type NodePort (the port opens on every node) exposes the router (with an API key); "
        "check that the nodes' security groups",
    ),
    "router-exposure-networkpolicy": (
        _both(
            _set("router", "ingress", value={"enabled": True}),
            _set(
                "networkPolicy",
                value={"clientsFrom": [{"podSelector": {}}], "exposedFrom": [{"podSelector": {}}]},
            ),
        ),
        _both(
            _set("router", "ingress", value={"enabled": True}),
            _set("networkPolicy", value={"clientsFrom": [{"podSelector": {}}]}),
        ),
        "networkPolicy.exposedFrom is empty",
    ),
    "router-route-models": (
        _set("router", "httpRoute", value={"enabled": True, "hostnames": {"qwen2-7b": []}}),
        _set("router", "httpRoute", value={"enabled": True, "hostnames": {"qwen2-70b": []}}),
        "router.httpRoute.hostnames names model 'qwen2-70b', which models[] lacks",
    ),
    "hyperpod-tenant-isolation": (
        _both(_hyperpod("3.7", **MULTIPROCESS), _set("cache", "tenantIsolation", value=True)),
        _both(_hyperpod("3.7"), _set("cache", "tenantIsolation", value=True)),
        "the operator's InProcess LMCache connector keys L1/L2 chunks on tokens alone",
    ),
    "hyperpod-multiprocess-record-hits": (
        _both(_hyperpod("3.7"), _set("cache", "l2", "eviction", "recordHits", value=True)),
        _both(_hyperpod("3.7", **MULTIPROCESS), _set("cache", "l2", "eviction", "recordHits", value=True)),
        "recordHits is on, but hyperpod.lmcache.mode MultiProcess loads no hit recorder",
    ),
    "hyperpod-api-key": (
        _set("auth", value={"apiKeySecret": {"name": "kv-key"}}),
        _both(_hyperpod("3.7"), _set("auth", value={"apiKeySecret": {"name": "kv-key"}})),
        "auth.apiKeySecret.name is set on target hyperpod",
    ),
    "model-revision-pinned": (
        _nothing,  # the baseline pins a commit
        _model(source={"huggingface": {"tokenSecret": {"name": "hf", "key": "token"}}}),
        "models[0] 'Qwen/Qwen2-7B-Instruct' is not pinned (no source.huggingface.revision)",
    ),
    "requests-within-limits": (
        _nothing,
        _model(resources={"requests": {"cpu": "8", "memory": "96Gi"}, "limits": {"memory": "64Gi"}}),
        "requests.memory 96Gi is above limits.memory 64Gi",
    ),
    "gpus-fit-instance": (
        _model(gpusPerReplica=4, instanceType="ml.g6e.12xlarge"),
        _model(gpusPerReplica=2),
        "ml.g6e.4xlarge has 1",
    ),
    "memory-fits-instance": (
        _model(resources={"requests": {"memory": "120Gi"}, "limits": {"memory": "120Gi"}}),
        _model(resources={"requests": {"memory": "200Gi"}, "limits": {"memory": "200Gi"}}),
        "is above the 128 GiB of ml.g6e.4xlarge",
    ),
    "ports-distinct": (
        _set("router", value={"port": 8080, "metricsPort": 29000}),
        _set("router", value={"port": 8080, "metricsPort": 8080}),
        "router: port 8080 is also router.port",
    ),
    "grace-covers-prestop": (
        _set("engine", value={"terminationGracePeriodSeconds": 120, "preStopSleepSeconds": 10}),
        _set("engine", value={"terminationGracePeriodSeconds": 30, "preStopSleepSeconds": 30}),
        "leaves nothing of terminationGracePeriodSeconds 30",
    ),
    "router-serves-engines": (
        _set("router", value={"replicas": 1}),
        _set("router", value={"replicas": 0}),
        "router.replicas is 0",
    ),
    "model-names-unique": (
        _second_model(),
        _second_model(name="qwen2-7b"),
        "models[1].name 'qwen2-7b' is also models[0].name",
    ),
    "test-prompt-fits-context": (
        _set("tests", value={"crosspodWords": 1500}),
        _set("tests", value={"crosspodWords": 9000}),
        "is at least 9016 tokens, above models[0].maxModelLen 8192",
    ),
    "curvine-csi-node-on-engine-nodes": (
        _set(
            "curvine",
            "csi",
            "node",
            "nodeSelector",
            value={"node.kubernetes.io/instance-type": "ml.g6e.4xlarge"},
        ),
        _set(
            "curvine",
            "csi",
            "node",
            "nodeSelector",
            value={"node.kubernetes.io/instance-type": "ml.g5.4xlarge"},
        ),
        "but models[0]'s pods run only on nodes with node.kubernetes.io/instance-type=ml.g6e.4xlarge",
    ),
    "test-prompt-covers-a-chunk": (
        # 300 words are at least 301 tokens: over a 256-token chunk in any tokenizer
        _set("tests", value={"crosspodWords": 300}),
        _set("tests", value={"crosspodWords": 20}),
        "tokens in any tokenizer, less than one chunk (cache.chunkSize 256)",
    ),
    "lmcache-version-matches-image": (
        _both(
            _set("cache", "lmcacheVersion", value="0.5.4"),
            _set(
                "engine",
                "image",
                value={"repository": "kvtier/vllm-cpu-lmcache", "tag": "0.31.9-lmcache0.5.4"},
            ),
        ),
        _both(
            _set("cache", "lmcacheVersion", value="0.4.9"),
            _set("engine", "image", value={"repository": "lmcache/vllm-openai", "tag": "v0.5.6"}),
        ),
        "engine.image.tag 'v0.5.6' is LMCache 0.5.6, but cache.lmcacheVersion is 0.4.9",
    ),
    "eviction-watermarks": (
        _set("cache", "l2", "eviction", value={"highWatermark": "85%", "lowWatermark": "400Gi"}),
        _set("cache", "l2", "eviction", value={"highWatermark": "85%", "lowWatermark": "90%"}),
        "lowWatermark 90% (450.0 GiB) is above highWatermark 85% (425.0 GiB)",
    ),
    "eviction-schedule-cron": (
        _set("cache", "l2", "eviction", value={"schedule": "@every 10m"}),
        _set("cache", "l2", "eviction", value={"schedule": "0 0 * * 7"}),
        "day of week field '7': 7 is above the maximum 6",
    ),
    "l2-claim-within-pool": (
        _set("cache", "l2", "claim", "size", value="1000Gi"),
        _set("cache", "l2", "claim", "size", value="1001Gi"),
        "is more than the pool of the 2 GPU node(s) the models fill (500 GiB each",
    ),
    "eviction-starts-within-pool": (
        _set("cache", "l2", "eviction", "capacity", value="1000Gi"),
        _set("cache", "l2", "eviction", "capacity", value="5000Gi"),
        "cache.l2.eviction.highWatermark 85% of 5000Gi (eviction.capacity) is 4250 GiB, more than the pool "
        "of the 2 GPU node(s) the models fill (500 GiB each after dirReserved)",
    ),
    "tp-divides-heads": (
        _model(gpusPerReplica=4),
        _model(gpusPerReplica=7),
        "tensor parallel size 7 and qwen2-7b-instruct's 4 KV heads do not divide one another",
    ),
    "parallel-fits-gpus": (
        _model(extraArgs=["-pp", "1"]),
        _model(gpusPerReplica=2, extraArgs=["--pipeline_parallel_size=2"]),  # vLLM's spelling rules
        "models[0] extraArgs[0] '--pipeline_parallel_size=2' asks for pipeline parallel size 2: "
        "2 (tensor) x 2 (pipeline) = 4 GPU ranks, and the pod gets gpusPerReplica 2 GPU(s)",
    ),
    "hub-offline-with-hub-source": (
        _set(
            "engine",
            "extraEnv",
            value=[{"name": "HF_HUB_OFFLINE", "value": "0"}, {"name": "X", "value": "1"}],
        ),
        _set(
            "engine",
            "extraEnv",
            value=[{"name": "HF_HUB_OFFLINE", "value": ""}, {"name": "TRANSFORMERS_OFFLINE", "value": "on"}],
        ),
        "engine.extraEnv[1] sets TRANSFORMERS_OFFLINE, and models[0] (Qwen/Qwen2-7B-Instruct) comes from the "
        "Hugging Face Hub into an empty cache",
    ),
    "startup-budget-fits-load": (
        _set("engine", "startupProbe", value={"periodSeconds": 5, "failureThreshold": 7}),
        _set("engine", "startupProbe", value={"periodSeconds": 10, "failureThreshold": 3}),
        "engine.startupProbe gives each engine 30 s to start; models[0] (qwen2-7b-instruct) has 14.2 GiB of "
        "weights",
    ),
    # (HUB_CASES: judged with the stand-in Hub serving the baseline's model)
    "model-facts-source": (
        _nothing,
        _model(model="acme/private-13b"),
        "models[0] (acme/private-13b): validate has no config.json for it (the Hub (http://127.0.0.1:",
    ),
    "hub-revision-exists": (
        _model(source={"huggingface": {"revision": "main"}}),
        _model(source={"huggingface": {"revision": "no-such-branch"}}),
        "models[0].source.huggingface.revision 'no-such-branch': the Hub (http://127.0.0.1:",
    ),
    "max-model-len-within-model": (
        _model(maxModelLen=32768),
        _model(maxModelLen=65536),
        "models[0].maxModelLen 65536 is above qwen2-7b-instruct's limit of 32768 positions",
    ),
    "engine-args-reserved": (
        _model(extraArgs=["--max-num-seqs", "4", "--enforce-eager"]),
        _model(extraArgs=["--enforce-eager", "--max_model_len=1024"]),
        "models[0].extraArgs[1] '--max_model_len=1024' sets --max-model-len to 1024 (vLLM reads underscores "
        "in a flag's name as dashes), which the chart renders from models[0].maxModelLen (now 8192)",
    ),
    "engine-args-one-per-item": (
        _model(extraArgs=["--max-num-seqs", "4", "--chat-template=my template.jinja"]),
        _model(extraArgs=["--max-num-seqs 4"]),
        "models[0].extraArgs[0] '--max-num-seqs 4' is one argument to vLLM",
    ),
    "engine-args-config-file": (
        _model(extraArgs=["--chat-template", "config.jinja"]),
        _model(extraArgs=["--config", "/etc/vllm/serve.yaml"]),
        "reads vLLM settings from a file kvtier cannot check",
    ),
    "vllm-arg-invalid": (
        _model(extraArgs=["--max-num-seqs", "4", "--enforce-eager", "--max_num_batched_tokens=8k"]),
        _both(_hyperpod("3.7"), _model(extraArgs=["--enforce-eager", "--max-num-seqs", "0"])),
        "refuses it (scheduler-fields): ValidationError: SchedulerConfig.max_num_seqs: Input should be "
        "greater than or equal to 1 (input 0)",
    ),
    "block-size-supported": (
        _both(_set("engine", value={"accelerator": "cpu"}), _model(extraArgs=["--block-size", "64"])),
        _both(_set("engine", value={"accelerator": "cpu"}), _model(extraArgs=["--block-size", "48"])),
        "--block-size 48 is not a multiple of 32 (vLLM CPU)",
    ),
    "backend-accelerator": (
        _both(NATIVE, _set("engine", "accelerator", value="nvidia")),
        _both(NATIVE, _set("engine", "accelerator", value="cpu")),
        "stock vLLM refuses to offload from CPU",
    ),
    "backend-vllm-version": (
        _both(NATIVE, _set("cache", "vllmVersion", value="0.23.0")),
        _both(NATIVE, _set("cache", "vllmVersion", value="0.22.1")),
        "cache.vllmVersion 0.22.1 has no fs tier (vLLM >= 0.23.0)",
    ),
    "labels-valid": (
        _both(
            _set("commonLabels", value={"example.com/team": "ml-1", "empty": ""}),
            _model(nodeSelector={"a": "b"}),
        ),
        _model(nodeSelector={"example.com/tier": "-gpu"}),
        "label example.com/tier='-gpu': it must be empty or start and end with a letter or digit",
    ),
    "tolerations-valid": (
        _model(tolerations=[{"operator": "Exists"}, {"key": "gpu", "operator": "Equal", "value": "x"}]),
        _model(tolerations=[{"key": "gpu", "operator": "Exists", "value": "x"}]),
        "toleration: operator Exists takes no value",
    ),
    "dtype-supported-by-gpu": (
        _model(dtype="half", instanceType="g4dn.xlarge"),
        _model(dtype="bfloat16", instanceType="g4dn.xlarge"),
        "its T4 GPU has compute capability 7.5",
    ),
    "dtype-supported-by-model": (
        _model(model="google/gemma-2-9b-it", dtype="bfloat16"),
        _model(model="google/gemma-2-9b-it", dtype="float16"),
        "vLLM refuses float16 for google/gemma-2-9b-it",
    ),
    "gpu-memory-holds-weights": (
        _model(gpuMemoryUtilization=0.5),
        _model(gpuMemoryUtilization=0.3),
        "weights in float16 take 14.2 GiB per GPU",
    ),
    # engine_rules.py (router topic): tensor parallel in one pod needs /dev/shm of 1Gi or more
    "tp-shm-size": (
        _both(_set("engine", "shmSize", value="1Gi"), _model(gpusPerReplica=4)),
        _both(_set("engine", "shmSize", value="64Mi"), _model(gpusPerReplica=4)),
        "engine.shmSize 64Mi is below 1Gi, too small for tensor parallel across GPUs in one pod",
    ),
    "curvine-mem-tier-within-limit": (
        _set(
            "curvine",
            "worker",
            value={
                "dataDirs": [{"path": "/dev/shm/curvine", "type": "MEM", "capacity": "4GB"}],
                "resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "8Gi"}},
            },
        ),
        _set(
            "curvine",
            "worker",
            value={
                "dataDirs": [{"path": "/dev/shm/curvine", "type": "MEM", "capacity": "32GB"}],
                "resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "8Gi"}},
            },
        ),
        "the worker is OOM-killed before the tier is full",
    ),
    "curvine-daemons-tolerate-engine-taints": (
        _set(
            "engine",
            "tolerations",
            value=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        ),
        _set(
            "engine",
            "tolerations",
            value=[{"key": "dedicated", "operator": "Equal", "value": "kv", "effect": "NoSchedule"}],
        ),
        "curvine.worker.tolerations does not tolerate it",
    ),
    # gpu_rules.py: Qwen2.5-72B's ~135 GiB of bf16 weights against one L40S, then eight 80 GB A100s
    "weights-fit-instance-gpus": (
        _model(model="Qwen/Qwen2.5-72B-Instruct", dtype="bfloat16", instanceType="ml.p4de.24xlarge"),
        _model(model="Qwen/Qwen2.5-72B-Instruct", dtype="bfloat16"),
        "GiB of weights in bfloat16; ml.g6e.4xlarge has 1 x 44.99 GiB L40S = 45.0 GiB of GPU memory in all",
    ),
    # model_source_rules.py: meta-llama is gated on the Hub
    "gated-model-needs-token": (
        _model(model="meta-llama/Llama-3.1-8B-Instruct"),
        _model(
            model="meta-llama/Llama-3.1-8B-Instruct",
            source={"huggingface": {"tokenSecret": {"name": "", "key": "token"}}},
        ),
        "models[0] (meta-llama/Llama-3.1-8B-Instruct) is a gated Hub repository and "
        "source.huggingface.tokenSecret.name is empty",
    ),
    # model_source_rules.py: Qwen2-7B's bfloat16 safetensors (14.2 GiB) land in the engine's cache emptyDir
    "engine-cache-holds-weights": (
        _set("engine", "cacheSize", value="20Gi"),
        _set("engine", "cacheSize", value="10Gi"),
        "engine.cacheSize 10Gi holds 10.0 GiB; models[0] (Qwen/Qwen2-7B-Instruct) downloads 14.2 GiB",
    ),
    # storage_rules.py: without the release's Curvine, an EBS class cannot give the RWX claim (by its name
    # alone a warning: tests/unit/test_rules_model_facts.py has the cluster's class)
    "l2-storageclass-gives-rwx": (
        _both(
            _set("curvine", "enabled", value=False),
            _set("cache", "l2", "claim", "storageClassName", value="efs-sc"),
        ),
        _both(
            _set("curvine", "enabled", value=False),
            _set("cache", "l2", "claim", "storageClassName", value="gp3"),
        ),
        "cache.l2.claim.storageClassName 'gp3' is by its name, on EKS and in the AWS drivers' examples, a "
        "class of ebs.csi.aws.com, whose volumes give only ReadWriteOnce",
    ),
    # curvine_rules.py: g6e.4xlarge has one 600 GB NVMe disk
    "curvine-data-dirs-fit-instance-store": (
        _nothing,
        _set(
            "curvine",
            "worker",
            "dataDirs",
            value=[{"path": "/opt/dlami/nvme/curvine-data", "type": "SSD", "capacity": "600GB"}],
        ),
        "more than ml.g6e.4xlarge's 600 GB instance store",
    ),
    # curvine_rules.py: instance-store data dirs want workers registered under the node name
    "curvine-worker-local-to-its-disk": (
        _set("curvine", "worker", "hostNetwork", value=True),
        _set("curvine", "worker", "hostNetwork", value=False),
        "curvine.worker.dataDirs[0] is on the nodes' instance store (/opt/dlami/nvme/curvine-data), but "
        "curvine.worker.hostNetwork is false",
    ),
    # curvine_rules.py: StorageClass parameters curvine-csi forwards to curvine-fuse
    "curvine-fuse-parameters": (
        _set(
            "curvine",
            "storageClass",
            "fuseParameters",
            value={"web-port": "9012", "max-background": "64", "congestion-threshold": "48"},
        ),
        _set("curvine", "storageClass", "fuseParameters", value={"web-port": "9012", "max-background": "64"}),
        "curvine.storageClass.fuseParameters.max-background: congestion_threshold 192 must be above 0 and at "
        "most max_background 64",
    ),
    "l2-claim-on-curvine": (
        _set("cache", "l2", "claim", "storageClassName", value="kv-curvine"),
        _set("cache", "l2", "claim", "storageClassName", value="gp3"),
        "cache.l2.claim.storageClassName is 'gp3', not this release's Curvine StorageClass",
    ),
}
DEPLOYED = {"curvine": {"master": {"replicas": 3}}}


# The rules whose cases need the Hub to answer validate (kvtier.validate.hub_facts); the tests run offline
# (tests/conftest.py), so those cases, and the baseline, get a stand-in Hub on loopback serving the baseline's
# model at its pinned revision: as validate judges online, where the facts come from the Hub.
HUB_CASES = {"model-facts-source", "hub-revision-exists"}


@pytest.fixture(autouse=True)
def _hub_where_needed(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[None]:
    callspec = getattr(request.node, "callspec", None)
    needed = callspec.params.get("rule_id") in HUB_CASES if callspec else False
    if not needed and request.node.name != "test_baseline_passes_every_values_rule":
        yield
        return
    hub = StandInHub()
    pinned = GOOD["models"][0]["source"]["huggingface"]["revision"]
    hub.add(GOOD["models"][0]["model"], shipped_config("qwen2-7b-instruct"), revisions={"pinned": pinned})
    go_online(monkeypatch, hub.start(), tmp_path / "hub-cache")
    yield
    hub.stop()


def _run(rule_id: str, mutation: Mutation) -> list[Any]:
    values = copy.deepcopy(GOOD)
    mutation(values)
    loaded = loader.load_text(yaml.safe_dump(values, sort_keys=False), Path("env.yaml"))
    return catalogue.run_values(ValuesContext(loaded.data, loaded, DEPLOYED), only=[rule_id])


# Values rules whose passing and triggering cases live in a module of their own: rule -> that module.
CASES_ELSEWHERE = {
    "vllm-scheduler-budget": Path(__file__).with_name("test_rules_scheduler.py"),
    "l2-read-slower-than-recompute": Path(__file__).with_name("test_l2_read_speed.py"),
    "model-code-trusted": Path(__file__).with_name("test_rules_model_code.py"),
    "vllm-loader-known": Path(__file__).with_name("test_rules_model_format.py"),
}


def test_every_values_rule_has_cases() -> None:
    values_rules = {r.id for r in catalogue.all_rules().values() if r.scope == "values"}
    assert values_rules == set(CASES) | set(CASES_ELSEWHERE)
    for rule_id, module in CASES_ELSEWHERE.items():
        assert rule_id not in CASES and rule_id in module.read_text(), (
            f"{module.name} holds no cases of {rule_id}"
        )


def test_rules_are_declared_with_reason_and_remedy() -> None:
    for r in catalogue.all_rules().values():
        assert r.id and r.reason and r.remedy, r
        assert len(r.reason.splitlines()) == 1


def test_baseline_passes_every_values_rule() -> None:
    values = copy.deepcopy(GOOD)
    loaded = loader.load_text(yaml.safe_dump(values), Path("env.yaml"))
    assert catalogue.run_values(ValuesContext(values, loaded, DEPLOYED)) == []


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_passes(rule_id: str) -> None:
    assert _run(rule_id, CASES[rule_id][0]) == []


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_triggers(rule_id: str) -> None:
    findings = _run(rule_id, CASES[rule_id][1])
    assert findings, f"{rule_id} did not trigger"
    first = findings[0]
    assert first.rule == rule_id
    assert CASES[rule_id][2] in first.message
    assert first.line is not None and first.path  # located in the file, with the key path
    assert first.reason == catalogue.all_rules()[rule_id].reason


def test_masters_unchanged_needs_a_deployed_release() -> None:
    values = copy.deepcopy(GOOD)
    values["curvine"]["master"]["replicas"] = 5
    loaded = loader.load_text(yaml.safe_dump(values), Path("env.yaml"))
    assert catalogue.run_values(ValuesContext(values, loaded, None), only=["curvine-masters-unchanged"]) == []


def test_defaults_from_the_chart_are_named_as_such() -> None:
    loaded = loader.load_text("target: standalone\n", Path("env.yaml"))
    values = {"target": "standalone", "cache": {"hashSeed": ""}}
    [finding] = catalogue.run_values(ValuesContext(values, loaded), only=["crosspod-hash-seed"])
    assert finding.line is None and "from the chart defaults" in finding.message


def test_hyperpod_operator_supports_names_tolerations_too() -> None:
    findings = _run(
        "hyperpod-operator-supports", _hyperpod("3.2", tolerations=[{"key": "k", "operator": "Exists"}])
    )
    assert [f.path for f in findings] == ["hyperpod.tolerations"]
    assert "needs operator >= 3.7; hyperpod.operator.version is 3.2" in findings[0].message

    # The standalone target has no operator: the same settings say nothing there.
    def standalone(values: dict[str, Any]) -> None:
        _hyperpod("3.2", tolerations=[{"key": "k", "operator": "Exists"}], **MULTIPROCESS)(values)
        values["target"] = "standalone"

    assert _run("hyperpod-operator-supports", standalone) == []


def test_native_chunk_must_be_a_multiple_of_the_block_size() -> None:
    # vLLM's offloading config refuses a block_size that the KV cache block size does not divide.
    uneven = _both(NATIVE, _set("cache", "chunkSize", value=200))
    [finding] = _run("block-size-supported", uneven)
    assert "cache.chunkSize 200 is not a multiple of models[0]'s block size 16" in finding.message
    assert _run("block-size-supported", _both(NATIVE, _set("cache", "chunkSize", value=256))) == []
    assert _run("block-size-supported", _set("cache", "chunkSize", value=200)) == []  # LMCache in-process


def test_an_engine_image_of_another_vllm_release_is_a_warning() -> None:
    image = {"repository": "vllm/vllm-openai", "tag": "v0.31.1"}
    mismatch = _both(
        NATIVE, _set("cache", "vllmVersion", value="0.30.2"), _set("engine", "image", value=image)
    )
    [finding] = _run("backend-vllm-version", mismatch)
    assert (
        finding.severity == "warning"
        and "runs vLLM 0.31.1 while cache.vllmVersion is 0.30.2" in finding.message
    )
    lmcache_image = {"repository": "lmcache/vllm-openai", "tag": "v0.4.9"}  # LMCache's release, not vLLM's
    assert _run("backend-vllm-version", _both(NATIVE, _set("engine", "image", value=lmcache_image))) == []


def test_a_request_near_the_instance_memory_is_a_warning_not_an_error() -> None:
    near = _model(resources={"requests": {"memory": "124Gi"}, "limits": {"memory": "124Gi"}})
    [finding] = _run("memory-fits-instance", near)
    assert finding.severity == "warning" and "leaves under 5% of ml.g6e.4xlarge's 128 GiB" in finding.message


def test_vllm_arg_invalid_is_a_warning_on_an_image_of_another_vllm() -> None:
    bad = _model(extraArgs=["--max-num-seqs", "0"])
    other = {"repository": "lmcache/vllm-openai", "tag": "v0.5.6"}  # a newer image: its vLLM may differ
    [finding] = _run("vllm-arg-invalid", _both(_set("engine", "image", value=other), bad))
    assert finding.severity == "warning" and "not the chart's default image" in finding.message
    [finding] = _run("vllm-arg-invalid", _both(_hyperpod("3.7", worker={"image": other}), bad))
    assert finding.severity == "warning"
    release = vllm_options.table().vllm  # the pinned vLLM the table was dumped from
    stock = {"repository": "vllm/vllm-openai", "tag": f"v{release}"}
    native = _both(NATIVE, _set("engine", "image", value=stock), bad)
    [finding] = _run("vllm-arg-invalid", native)
    assert finding.severity == "error", "stock vLLM of the table's release: its facts hold"
    cpu = {"repository": "kvtier/vllm-cpu-lmcache", "tag": f"{release}-lmcache{LMCACHE}"}
    [finding] = _run("vllm-arg-invalid", _both(_set("engine", "image", value=cpu), bad))
    assert finding.severity == "error", "the CPU rig's image, tagged with its vLLM release"
    older = {"repository": "vllm/vllm-openai", "tag": "v0.30.2"}
    [finding] = _run("vllm-arg-invalid", _both(NATIVE, _set("engine", "image", value=older), bad))
    assert finding.severity == "warning"


def test_vllm_arg_invalid_judges_both_targets_and_leaves_reserved_flags_to_their_rule() -> None:
    extra = ["--kv-cache-dtype", "bogus", "--max_model_len=long", "--no-such-flag", "--max-num-seqs 4"]
    for target in (_nothing, _hyperpod("3.7")):
        findings = _run("vllm-arg-invalid", _both(target, _model(extraArgs=extra)))
        # --max_model_len (engine-args-reserved) and the one-item flag and value (engine-args-one-per-item)
        # are reported by their own rules
        assert [f.path for f in findings] == ["models[0].extraArgs[0]", "models[0].extraArgs[3]"]
        assert "invalid choice: 'bogus'" in findings[0].message
        assert "unrecognized arguments: --no-such-flag" in findings[1].message
