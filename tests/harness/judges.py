"""The real judges of a values file, asked directly and not through `kvtier validate`: the oracle of the
differential tests.

- Helm: the pinned Helm 3 binary renders the chart with the file (`helm template`), as `helm install`
  would before it sends anything; a non-zero exit is a refusal, in Helm's words.
- The API server: every rendered object is sent with the official Kubernetes client's dynamic client as a
  server-side apply with dryRun=All and strict field validation, after the release's ServiceAccounts are
  created for real (Helm creates them before the pods that use them).
- vLLM: each rendered engine's `vllm serve` argv (a container's, or a HyperPod endpoint worker's) goes
  through the pinned vLLM's parser and the config checks the serve path runs before it reads the model
  (engine_rig/vllm_args_probe.py), then its scheduler settings through vLLM's SchedulerConfig with the batch
  defaults vLLM fills in for the engine's device (harness/engine/serve_judge_probe.py: one process in the
  engine venv for every argv). The device is the GPU of the instance type the pod is pinned to (every GPU
  of the instance table where it is pinned to none), or the CPU for an engine that asks for no GPU.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, dynamic
from kubernetes.dynamic.exceptions import ApiException, ResourceNotFoundError

from harness import engine as engine_probes
from kvtier import facts, paths
from kvtier.engine_rig import rig

CHART = paths.CHARTS / "kv-tiered-inference"
RELEASE = "kvtier"
KUBE_VERSION = "1.35.0"
MANAGER = "kvtier-oracle"
PROBE = Path(engine_probes.__file__).with_name("serve_judge_probe.py")
INSTANCE_LABEL = "node.kubernetes.io/instance-type"
GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True)
class Engine:
    image: str
    argv: list[str]  # after `vllm`
    workload: str  # the Deployment's (or endpoint's) name
    devices: list[dict[str, Any]]  # what the scheduler judge runs it on (harness/engine/serve_judge_probe.py)


@dataclass
class Verdict:
    """What the real judges said of one file: every refusal as (judge, category, message)."""

    refusals: list[tuple[str, str, str]] = field(default_factory=list)
    manifests: list[dict[str, Any]] = field(default_factory=list)
    engines: list[Engine] = field(default_factory=list)  # those on the pinned vLLM
    engine_extras: list[dict[str, Any]] = field(default_factory=list)  # serve_judge_probe's, per engine

    @property
    def refused(self) -> bool:
        return bool(self.refusals)


def helm_render(helm: Path, values: Path, namespace: str) -> tuple[list[dict[str, Any]] | None, str]:
    """(the rendered objects, "") or (None, Helm's error)."""
    proc = subprocess.run(
        [
            str(helm),
            "template",
            RELEASE,
            str(CHART),
            "-f",
            str(values),
            "--namespace",
            namespace,
            "--kube-version",
            KUBE_VERSION,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        return None, proc.stderr.strip()
    return [d for d in yaml.safe_load_all(proc.stdout) if isinstance(d, dict)], ""


def helm_category(error: str) -> str:
    """A refusal by Helm, by its kind: the chart's schema, a template's `fail` (with its rule id), other."""
    if "don't meet the specifications of the schema" in error:
        return "helm: values schema"
    if match := re.search(r"execution error at \([^)]*\): (\[[a-z0-9-]+\])?", error):
        return f"helm: fail {match.group(1) or '(no rule id)'}"
    if "error converting YAML to JSON" in error:
        return "helm: YAML of a render"
    return "helm: template error"


class ApiServer:
    """Server-side dry runs through the official client's dynamic client, in one namespace."""

    def __init__(self, api: client.ApiClient, namespace: str, cache_dir: Path) -> None:
        # The dynamic client keeps discovery in a file named after the server's address: a cluster of an
        # earlier session on the same loopback port would answer for this one. Its own file, then.
        self.client = dynamic.DynamicClient(api, cache_file=str(cache_dir / "discovery.json"))
        self.namespace = namespace
        self._resources: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()  # discovery's cache is not for threads; the requests are

    def _resource(self, api_version: str, kind: str) -> Any:
        with self._lock:
            if (api_version, kind) not in self._resources:
                try:
                    found = self.client.resources.get(api_version=api_version, kind=kind)
                except ResourceNotFoundError:
                    found = None
                self._resources[api_version, kind] = found
            return self._resources[api_version, kind]

    def _apply(self, manifest: dict[str, Any], dry_run: bool) -> tuple[str, str] | None:
        resource = self._resource(str(manifest.get("apiVersion")), str(manifest.get("kind")))
        if resource is None:
            return "not served", f"{manifest.get('apiVersion')} {manifest.get('kind')}"
        try:
            self.client.server_side_apply(
                resource,
                body=manifest,
                namespace=self.namespace if resource.namespaced else None,
                field_manager=MANAGER,
                force_conflicts=True,
                **({"dry_run": "All"} if dry_run else {}),
                query_params=[("fieldValidation", "Strict")],
            )
        except ApiException as error:
            try:
                status = json.loads(error.body or "")
            except (TypeError, ValueError):
                status = {"reason": str(error.status), "message": str(error.body)}
            causes = (status.get("details") or {}).get("causes") or []
            reason = causes[0].get("reason") if causes else status.get("reason")
            return f"server: {reason}", str(status.get("message"))
        return None

    def judge(self, manifests: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
        refusals = []
        for manifest in manifests:
            dry = not (manifest.get("kind") == "ServiceAccount" and manifest.get("apiVersion") == "v1")
            answer = self._apply(manifest, dry_run=dry)
            if answer is not None and answer[0] != "not served":
                subject = f"{manifest.get('kind')}/{(manifest.get('metadata') or {}).get('name')}"
                refusals.append(("API server", answer[0], f"{subject}: {answer[1]}"))
        return refusals


def _gpu_devices(instance: Any) -> list[dict[str, Any]]:
    """The GPU an instance type has, or every GPU of the instance table where the type is not known."""
    gpus = facts.gpus()
    found = facts.instance_type(instance) if instance else None
    names = [found.gpu] if found else sorted({t.gpu for t in facts.instance_types().values()})
    return [{"gpu": {"memory_gib": gpus[n].memory_gib, "name": n}} for n in names]


def _pod_devices(pod: dict[str, Any], container: dict[str, Any]) -> list[dict[str, Any]]:
    resources = container.get("resources") or {}
    asks = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
    if GPU_RESOURCE not in asks:
        return [{"cpu": True}]
    return _gpu_devices((pod.get("nodeSelector") or {}).get(INSTANCE_LABEL))


def engines(manifests: list[dict[str, Any]]) -> list[Engine]:
    """Every rendered engine: a container whose command is vLLM's CLI (the argv after `vllm`), and a
    HyperPod endpoint's worker, whose image's entrypoint is `vllm serve` and whose args the operator
    passes to it (the model path first)."""
    found = []
    for m in manifests:
        spec = m.get("spec") or {}
        name = str((m.get("metadata") or {}).get("name"))
        if m.get("kind") == "InferenceEndpointConfig" and isinstance(spec.get("worker"), dict):
            worker = spec["worker"]
            argv = ["serve", *(str(a) for a in worker.get("args") or [])]
            found.append(Engine(str(worker.get("image")), argv, name, _gpu_devices(spec.get("instanceType"))))
            continue
        pod = (spec.get("template") or {}).get("spec") or {}
        for c in pod.get("containers") or []:
            if c.get("command") == ["vllm"]:
                argv = [str(a) for a in c.get("args") or []]
                found.append(Engine(str(c.get("image")), argv, name, _pod_devices(pod, c)))
    return found


def vllm_verdicts(
    argvs: list[list[str]], devices: list[list[dict[str, Any]]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the argv probe's verdict on each argv, serve_judge_probe's extras for each), in one process of the
    engine venv's vLLM."""
    with tempfile.TemporaryDirectory(prefix="kvtier-oracle-") as folder:
        cases = Path(folder) / "cases.json"
        cases.write_text(json.dumps({"argvs": argvs, "devices": devices}))
        run = subprocess.run(
            [str(rig.engine_python()), str(PROBE), str(cases)], capture_output=True, text=True, timeout=1200
        )
    lines = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    verdicts = [line for line in lines if "ok" in line]
    extras = [line["extras"] for line in lines if "extras" in line]
    if run.returncode != 0 or len(verdicts) != len(argvs) or len(extras) != len(argvs):
        raise RuntimeError(f"the vLLM probe failed (exit {run.returncode}): {run.stderr[-2000:]}")
    return verdicts, extras
