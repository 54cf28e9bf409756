"""kube-resources-admitted (kvtier.validate.checks.resource_rules) against the real API server: seeded Pods
and Deployments whose one container's resources are drawn across names (standard, huge pages of real and odd
sizes, extended, native prefixed, malformed) and quantities (whole, fractional, sub-milli, pages and not),
everything else valid, go to the test cluster's server-side dry run and to `judge`. The verdicts must
agree object for object; and the rule must report exactly the refusals that `requests-within-limits` does
not already report from the values.

KVTIER_RESOURCE_CASES (default 300) sets how many objects, KVTIER_RESOURCE_SEED the seed.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from kvtier.cluster.common.rest import Rest
from kvtier.validate import catalogue
from kvtier.validate.checks.resource_rules import OVER_LIMIT, judge
from kvtier.validate.layers import server
from kvtier.validate.rules import ManifestsContext

CASES = int(os.environ.get("KVTIER_RESOURCE_CASES", "300"))
SEED = int(os.environ.get("KVTIER_RESOURCE_SEED", "20261206"))
RULE = "kube-resources-admitted"
NAMES = [
    "cpu",
    "memory",
    "ephemeral-storage",
    "hugepages-2Mi",
    "hugepages-1Gi",
    "hugepages-3Mi",
    "hugepages-big",
    "nvidia.com/gpu",
    "vpc.amazonaws.com/efa",
    "aws.amazon.com/neuron",
    "example.kubernetes.io/widget",
    "gpu",
    "pods",
    "NVIDIA.com/gpu",
    "requests.example.com/x",
    "a/b/c",
    "a" * 245 + ".com/x",  # qualified, but its quota name requests.<name> is past 253 characters
]
COMMON = ["cpu", "memory", "nvidia.com/gpu", "vpc.amazonaws.com/efa", "hugepages-2Mi", "hugepages-1Gi"]
AMOUNTS = [1, 2, 4, "0.5", "0.9999", "1.0001", "500m", "2Mi", "3Mi", "4Mi", "1Gi", "2Gi", 0, "-1"]


def _resources(rng: random.Random) -> dict[str, Any]:
    pool = COMMON if rng.random() < 0.7 else NAMES
    out: dict[str, Any] = {}
    for kind in ("limits", "requests"):
        chosen = rng.sample(pool, rng.randint(0, 3))
        out[kind] = {n: rng.choice(AMOUNTS) for n in chosen}
    if out["limits"] and rng.random() < 0.5:  # requests equal to the limits, where valid pods come from
        out["requests"] = dict(out["limits"])
        if rng.random() < 0.4:  # one request off its limit, below or above
            out["requests"][rng.choice(sorted(out["limits"]))] = rng.choice(AMOUNTS)
    if rng.random() < 0.5:
        out["limits"]["memory"] = out["requests"]["memory"] = "1Gi"
    return {k: v for k, v in out.items() if v}


def _pod_spec(rng: random.Random) -> dict[str, Any]:
    container = {"name": "main", "image": "registry.invalid/never-pulled:1", "resources": _resources(rng)}
    return {"containers": [container]}


def _manifest(rng: random.Random, i: int) -> dict[str, Any]:
    spec = _pod_spec(rng)
    if rng.random() < 0.5:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"}, "spec": spec}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"d{i}"},
        "spec": {
            "selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}}, "spec": spec},
        },
    }


def _resources_of(manifest: dict[str, Any]) -> Any:
    spec = manifest["spec"] if manifest["kind"] == "Pod" else manifest["spec"]["template"]["spec"]
    return spec["containers"][0]["resources"]


def _wait_default_account(rest: Rest, namespace: str) -> None:
    deadline = time.monotonic() + 60
    while rest.find(f"/api/v1/namespaces/{namespace}/serviceaccounts/default") is None:
        assert time.monotonic() < deadline, "the controller manager made no default ServiceAccount"
        time.sleep(0.5)


def test_judge_agrees_with_the_api_server_object_for_object(kube_rest: Rest, make_namespace) -> None:
    namespace = make_namespace("resources", enforce="privileged")
    _wait_default_account(kube_rest, namespace)
    api = server.Judge(kube_rest, namespace, "the test cluster")
    rng = random.Random(SEED)
    disagreements, refused = [], 0
    for i in range(CASES):
        manifest = _manifest(rng, i)
        status = api.apply(manifest)
        offline = judge(_resources_of(manifest))
        refused += status is not None
        if (status is not None) != bool(offline):
            disagreements.append((_resources_of(manifest), (status or {}).get("message"), offline))
        reported = catalogue.run_manifests(ManifestsContext([manifest], namespace), "x", only=[RULE])
        assert bool(reported) == any(kind != OVER_LIMIT for _, _, kind in offline), manifest
    assert not disagreements, (len(disagreements), disagreements[:3])
    assert CASES // 10 < refused < CASES * 9 // 10, (
        f"the generator tests little: {refused} of {CASES} refused"
    )
    print(f"\n{CASES} objects (seed {SEED}): the API server refused {refused}; judge agreed on every one")
