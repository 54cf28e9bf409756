"""values/cpu.yaml's whole umbrella on a real-node cluster, for the node tests and the tier benchmark:
what they add to install it there, and nothing else.

The images point at the ones built here (`pullPolicy: Never`), the model is the rig's generated tiny
model on a claim instead of a Hugging Face download (no route out of the cluster's network namespace),
and the sizes fit two engines on two shared cores (the tiered rig's overlay). The model's claim is a
hostPath PersistentVolume in the cluster's folder; the L2 claim is the chart's own on a Curvine StorageClass
(curvine_release) when one is given, else a hostPath stand-in.
"""

from __future__ import annotations

import copy
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvtier import helmyaml, paths, waiting
from kvtier.cluster.realnode import config as realconfig
from kvtier.cluster.realnode import diagnosis, images
from kvtier.cluster.realnode import lifecycle as realnode
from kvtier.cluster.realnode.client import Kube
from kvtier.engine_rig import rig as engine_rig
from kvtier.engine_rig import tiers

UMBRELLA = paths.CHARTS / "kv-tiered-inference"
INSTALL_TIMEOUT = "15m"  # two engines import vLLM and load the model on two shared cores
RUN_AS = 1000  # the engines' runAsUser and fsGroup in the chart
CLAIMS = {"kv-l2": "5Gi", "rig-model": "1Gi"}  # values/cpu.yaml's existing L2 claim, the rig's model


def engine_deployment(release: str) -> str:
    return f"{release}-kv-tiered-inference-{engine_rig.MODEL_NAME}"


def overlay(cluster: realnode.RealCluster, engine_image: str, backend: str = tiers.LMCACHE) -> dict[str, Any]:
    values = tiers.rig_overlay(chunk_size=256, backend=backend)
    (model,) = values["models"]
    # Two engines, the router and the test pods share two cores and the machine's memory.
    model["resources"] = {"requests": {"cpu": "100m", "memory": "2Gi"}, "limits": {"memory": "6Gi"}}
    values["engine"]["image"] = images.chart_image_values(engine_image)
    values["router"] = {"image": images.chart_image_values(cluster.images["router"])}
    values["cache"]["l2"] = {"eviction": {"image": images.chart_image_values(cluster.images["python"])}}
    return values


def import_into_every_node(
    cluster: realnode.RealCluster, built: list[images.Image], progress: images.Progress
) -> None:
    """`built` into each node's own containerd (a pod runs on a node only with its image there); a one-node
    cluster lists no nodes, and its node 1 is the cluster's folder."""
    lay = realnode.layout(cluster.name)
    for node in cluster.nodes or (realconfig.node(cluster.name, 1),):
        images.import_into(node.home(lay).containerd_socket, built, progress)


def hostpath_claim(ns: str, name: str, path: Path, size: str) -> list[dict[str, Any]]:
    """A hostPath PersistentVolume on the node's folder `path` and the ReadWriteMany claim `name` bound to
    it (the chart's L2 expects RWX; nothing provisions here)."""
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"{ns}-{name}"},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "claimRef": {"namespace": ns, "name": name},
            "hostPath": {"path": str(path), "type": "Directory"},
        },
    }
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": f"{ns}-{name}",
            "resources": {"requests": {"storage": size}},
        },
    }
    return [pv, claim]


@dataclass
class Prepared:
    namespace: str
    volumes: Path  # the node folder holding both claims' data and the overlay file
    values: Path  # the overlay given after values/cpu.yaml to every helm install/upgrade


def prepare(kube: Kube, ns: str, overlay_values: dict[str, Any], l2_storage_class: str = "") -> Prepared:
    """The namespace with the model's claim (the generated model, readable by the engines' user), the L2
    (the chart's claim on `l2_storage_class`, else a hostPath claim owned by the engines' user) and the
    overlay written next to them."""
    kube.kubectl("create", "namespace", ns)
    volumes = realnode.layout(kube.cluster.name).root / "volumes" / ns
    models = volumes / "models"
    for path in engine_rig.generate_model(models / engine_rig.MODEL_NAME).iterdir():
        path.chmod(0o644)  # safetensors writes the weights 0600: readable by the engines' user, as on a PVC
    claims = hostpath_claim(ns, "rig-model", models, CLAIMS["rig-model"])
    if l2_storage_class:
        overlay_values = copy.deepcopy(overlay_values)
        l2_values = overlay_values["cache"].setdefault("l2", {})
        l2_values["claim"] = {
            "existingClaim": "",
            "storageClassName": l2_storage_class,
            "size": CLAIMS["kv-l2"],
        }
    else:
        l2 = volumes / "l2"
        l2.mkdir(parents=True)
        shutil.chown(l2, RUN_AS, RUN_AS)  # hostPath ignores fsGroup: the engines' user owns the L2 directory
        claims += hostpath_claim(ns, "kv-l2", l2, CLAIMS["kv-l2"])
    kube.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": claims}))
    values = volumes / "overlay.yaml"
    values.write_text(helmyaml.dump(overlay_values))  # read by Helm: quote what its YAML would retype
    return Prepared(ns, volumes, values)


def remove(kube: Kube, prepared: Prepared) -> None:
    """The namespace, both PersistentVolumes and their data (not waited for)."""
    ns = prepared.namespace
    kube.kubectl("delete", "namespace", ns, "--wait=false", check=False)
    kube.kubectl("delete", "pv", *(f"{ns}-{claim}" for claim in CLAIMS), "--wait=false", check=False)
    shutil.rmtree(prepared.volumes, ignore_errors=True)


def pods(kube: Kube, ns: str, release: str, component: str) -> list[dict[str, Any]]:
    selector = f"app.kubernetes.io/instance={release},app.kubernetes.io/component={component}"
    return json.loads(kube.kubectl("get", "pods", "-n", ns, "-l", selector, "-o", "json"))["items"]


def wait_ready(kube: Kube, ns: str, release: str, timeout: float = 900) -> None:
    """Until both Deployments have rolled out (every replica updated and available, no old one left) and no
    pod of the release is still terminating. Helm 3's --wait counts a Deployment ready at replicas -
    maxUnavailable ready pods (the engines roll with maxUnavailable 1), so it can return early."""
    kubectl = str(paths.TOOLS_BIN / "kubectl")
    engines = engine_deployment(release)
    for deployment in (engines, f"{engines}-router"):
        rollout = [
            kubectl,
            "rollout",
            "status",
            "-n",
            ns,
            f"deployment/{deployment}",
            f"--timeout={timeout:.0f}s",
        ]
        kube.run(rollout, timeout=timeout + 60)
    waiting.wait_until(
        lambda: (
            not any(
                p["metadata"].get("deletionTimestamp")
                for c in ("engine", "router")
                for p in pods(kube, ns, release, c)
            )
        ),
        deadline=waiting.deadline_in(timeout),
        fail=lambda _: AssertionError(
            f"pods of release {release} in {ns} still terminating after {timeout:.0f} s"
        ),
        interval=2,
    )


def helm_test(kube: Kube, ns: str, release: str, helm_major: str = "helm3") -> tuple[dict[str, Any], str]:
    """`helm test --logs` of the release: each test pod's JSON verdict by its check (the chart's test
    scripts print one), and Helm's whole output for a failure's message."""
    result = kube.helm(helm_major, "test", release, "-n", ns, "--logs", "--timeout", "10m", timeout=700)
    verdicts = {}
    for line in result.stdout.splitlines():  # helm prints each pod's log after "POD LOGS: <pod>"
        if line.startswith("{"):
            verdict = json.loads(line)
            verdicts[verdict["check"]] = verdict
    return verdicts, result.stdout


def rollout(kube: Kube, prepared: Prepared, verb: str, release: str, *extra: str) -> float:
    """`helm3 <verb>` (install, upgrade) of the umbrella with values/cpu.yaml, the overlay, then `extra`,
    --wait, and then until every pod is Ready (wait_ready); the seconds it took. A failure's first line
    says why the pods are not Ready (diagnosis), read while the cluster still holds the evidence."""
    started = time.monotonic()
    root = realnode.layout(kube.cluster.name).root
    with diagnosis.explained(
        kube, prepared.namespace, root, f"helm {verb} of {release} did not become Ready"
    ):
        kube.helm(
            "helm3", verb, release, str(UMBRELLA), "-n", prepared.namespace,
            "-f", str(paths.VALUES / "cpu.yaml"), "-f", str(prepared.values), *extra,
            "--wait", "--timeout", INSTALL_TIMEOUT, timeout=1000,
        )  # fmt: skip
        wait_ready(kube, prepared.namespace, release)
    return time.monotonic() - started
