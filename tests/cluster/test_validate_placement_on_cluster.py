"""`kvtier validate --context`: the rendered engines are held to the test cluster's nodes as kube-scheduler
would hold them. Two GPU nodes of this test carry the GPU taint the chart tolerates and a `dedicated` taint
it does not: the engines can run nowhere (an error). A values file that adds the `dedicated` toleration
replaces engine.tolerations (Helm replaces lists), so the GPU toleration is gone and it is still an error,
now about the GPU taint, at the user's line. Repeating both tolerations passes."""

from __future__ import annotations

from pathlib import Path

import yaml

from harness import node_pool
from kvtier import paths
from kvtier.cluster.common.rest import Rest
from kvtier.cluster.kwok import nodes as fake_nodes
from kvtier.validate import pipeline
from kvtier.validate.checks.placement import PLACEMENT

STAGING = paths.VALUES / "staging.yaml"
POOL = "kvtier.test/placement"
GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
DEDICATED = {"key": "dedicated", "operator": "Equal", "value": "inference", "effect": "NoSchedule"}


def _node(run: str, i: int) -> dict:
    allocatable = {"cpu": "15890m", "memory": "127382Mi", "nvidia.com/gpu": "1", "pods": "110"}
    labels = {POOL: run, fake_nodes.FAKE_LABEL: "true", "node.kubernetes.io/instance-type": "ml.g6e.4xlarge"}
    taints = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}, {**DEDICATED}]
    del taints[1]["operator"]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"placement-{run}-{i}", "labels": labels},
        "spec": {"taints": taints},
        "status": {"capacity": allocatable, "allocatable": allocatable},
    }


def _placement(kubeconfig: Path, namespace: str, overlay: Path) -> tuple[pipeline.FileReport, list]:
    options = pipeline.Options(
        helm_majors=(3,),
        minors=("1.35",),
        namespace=namespace,
        kube_context=yaml.safe_load(kubeconfig.read_text())["current-context"],
        kubeconfig=str(kubeconfig),
        values=(overlay,),
    )
    [report] = pipeline.validate([STAGING], options)
    return report, [f for f in report.findings if f.check == PLACEMENT]


def test_engines_no_node_tolerates_are_an_error_at_the_tolerations_the_user_wrote(
    kube_cluster: Path, kube_rest: Rest, make_namespace, tmp_path: Path
) -> None:
    namespace = make_namespace("placement", enforce="privileged")
    run = node_pool.run_id()
    nodes = [_node(run, i) for i in range(2)]
    pinned = {"models": yaml.safe_load(STAGING.read_text())["models"]}
    for model in pinned["models"]:
        model["nodeSelector"] = {POOL: run}

    def overlay(tolerations: list | None) -> Path:
        values = dict(pinned) | ({"engine": {"tolerations": tolerations}} if tolerations is not None else {})
        path = tmp_path / f"overlay-{len(list(tmp_path.iterdir()))}.yaml"
        path.write_text(yaml.safe_dump(values, sort_keys=False))
        return path

    with node_pool.added(kube_rest, nodes, f"{POOL}={run}"):
        report, found = _placement(kube_cluster, namespace, overlay(None))
        engines = [f for f in found if "engine" in f.subject.lower() or "Deployment/" in f.subject]
        # Failed once (2026-12-03) with no placement finding at all, most likely as the preflight test did
        # on 2026-12-05: a bare hex run label like 123e45 is a number in YAML (node_pool.run_id).
        assert engines and all(f.severity == "error" for f in engines), (found, report.fatal, report.checks)
        assert all("dedicated=inference:NoSchedule not tolerated" in f.message for f in engines), engines
        assert report.checks[PLACEMENT].status == "failed"

        report, found = _placement(kube_cluster, namespace, with_dedicated := overlay([DEDICATED]))
        assert found and all("nvidia.com/gpu=present:NoSchedule not tolerated" in f.message for f in found), (
            found
        )
        assert {f.path for f in found} == {"engine.tolerations"}, found
        assert {f.file for f in found} == {str(with_dedicated)} and all(f.line for f in found), found

        report, found = _placement(kube_cluster, namespace, overlay([GPU, DEDICATED]))
        assert not found, found
        assert report.checks[PLACEMENT].status == "ok", report.checks[PLACEMENT]
