"""What the charts' NetworkPolicies allow, computed by IBM np-guard's network-config-analyzer (`nca`, in
.venv-netpol: `make netpol`), an implementation of NetworkPolicy semantics the charts did not write.

No network plugin that enforces NetworkPolicies runs on this machine's real node (docs/security.md), so
the analyzer is the judge: it reads the rendered workloads and policies, plus bystander pods, and prints
every allowed pod-to-pod (and address-range) connection.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from kvtier import paths

NCA = paths.ROOT / ".venv-netpol" / "bin" / "nca"
OUTSIDE = "0.0.0.0-255.255.255.255"
ALL = "all"

# Pods that belong to nobody in the release: one in its namespace, a Prometheus in `monitoring`.
BYSTANDERS = """
apiVersion: v1
kind: Namespace
metadata: {{name: {ns}, labels: {{kubernetes.io/metadata.name: {ns}}}}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: monitoring, labels: {{kubernetes.io/metadata.name: monitoring}}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: prometheus, namespace: monitoring, labels: {{app: prometheus}}}}
spec: {{containers: [{{name: p, image: p}}]}}
---
apiVersion: v1
kind: Pod
metadata: {{name: stranger, namespace: {ns}, labels: {{app: stranger}}}}
spec: {{containers: [{{name: s, image: s}}]}}
"""

# Where nca puts the ingress controller it simulates once the resources hold an Ingress (its LiveSim
# ingress_controller.yaml: a Namespace labelled `name: ingress-controller-ns`, a pod `app: ingress-nginx`).
LIVESIM_INGRESS_NAMESPACE = "ingress-controller-ns"

_LINE = re.compile(r"^(?P<src>\S+) => (?P<dst>\S+) : (?P<conn>.+)$")
_CONN = re.compile(r"\{protocols:(?P<protos>[A-Z, ]+),dst_ports:(?P<ports>[0-9,\-]+)\}")


def missing() -> str:
    return "" if NCA.exists() else f"{NCA} missing: run `make netpol` (toolchain/side-venv.sh netpol)"


@dataclass(frozen=True)
class Connectivity:
    """Allowed connections between roles: (src role, dst role) -> {(protocol, port)} or {ALL}."""

    allowed: dict[tuple[str, str], set[tuple[str, int] | str]]

    def ports(self, src: str, dst: str) -> set[tuple[str, int] | str]:
        return self.allowed.get((src, dst), set())

    def tcp(self, src: str, dst: str) -> set[int]:
        """TCP ports src may open on dst (ALL stays visible as -1)."""
        found = self.ports(src, dst)
        ports = {port for proto, port in (x for x in found if x != ALL) if proto == "TCP"}
        return ports | ({-1} if ALL in found else set())


def _role(labels: dict[str, str]) -> str:
    """A pod's component label; Curvine's prefixed with `curvine-` (both charts have a `test`)."""
    component = labels["app.kubernetes.io/component"]
    return f"curvine-{component}" if labels.get("app.kubernetes.io/part-of") == "curvine" else component


def _roles(docs: list[dict]) -> dict[str, str]:
    """Workload name -> role of its pods."""
    roles: dict[str, str] = {}
    for doc in docs:
        kind, name = doc.get("kind"), doc.get("metadata", {}).get("name", "")
        if kind == "Pod":
            roles[name] = _role(doc["metadata"]["labels"])
        elif kind == "CronJob":
            roles[name] = _role(doc["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"])
        elif kind in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            roles[name] = _role(doc["spec"]["template"]["metadata"]["labels"])
    return roles


def _role_of(endpoint: str, roles: dict[str, str]) -> str:
    if endpoint == OUTSIDE or re.match(r"^[0-9.]+-[0-9.]+$", endpoint):
        return "outside" if endpoint == OUTSIDE else f"range:{endpoint}"
    namespace, name = endpoint.split("/", 1)
    if name in ("stranger", "prometheus"):
        return name
    if namespace == LIVESIM_INGRESS_NAMESPACE:
        return "ingress-controller"
    # nca names a workload's pods <workload>-<n>; a Pod keeps its name.
    best = max((w for w in roles if name == w or name.startswith(w + "-")), key=len, default="")
    assert best, f"nca endpoint {endpoint!r} matches no rendered workload ({sorted(roles)})"
    return roles[best]


def _nca(rendered: str, namespace: str, work: Path, *query: str) -> subprocess.CompletedProcess[str]:
    """nca's `query` over a render (its policies and workloads) plus the bystanders."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "render.yaml").write_text(rendered)
    (work / "bystanders.yaml").write_text(BYSTANDERS.format(ns=namespace))
    resources = ["--resource_list", "render.yaml", "--resource_list", "bystanders.yaml"]
    return subprocess.run(
        [str(NCA), *query, "render.yaml", *resources], cwd=work, capture_output=True, text=True, timeout=300
    )


def connectivity(rendered: str, namespace: str, work: Path) -> Connectivity:
    """Every allowed connection, between roles rather than pod names."""
    pairs = ("--output_format", "txt_no_fw_rules", "--output_endpoints", "pods", "--connectivity")
    run = _nca(rendered, namespace, work, *pairs)
    assert run.returncode == 0, f"nca failed ({run.returncode}): {run.stderr[-2000:]}"
    roles = _roles([d for d in yaml.safe_load_all(rendered) if d])
    allowed: dict[tuple[str, str], set[tuple[str, int] | str]] = {}
    for line in run.stdout.splitlines():
        match = _LINE.match(line.strip())
        if not match:
            continue
        key = (_role_of(match["src"], roles), _role_of(match["dst"], roles))
        conns = allowed.setdefault(key, set())
        if match["conn"].strip() == "All connections":
            conns.add(ALL)
            continue
        for conn in _CONN.finditer(match["conn"]):
            for proto in (p.strip() for p in conn["protos"].split(",")):
                for span in conn["ports"].split(","):
                    low, _, high = span.partition("-")
                    conns.update((proto, port) for port in range(int(low), int(high or low) + 1))
    assert allowed, f"nca printed no connection at all:\n{run.stdout[-2000:]}"
    return Connectivity(allowed)


def sanity(rendered: str, namespace: str, work: Path) -> str:
    """nca's sanity query (policies that select nothing, rules that match nothing): '' when clean."""
    run = _nca(rendered, namespace, work, "--sanity")
    out = run.stdout + run.stderr
    return "" if run.returncode == 0 and "passed sanity check" in out else out[-3000:]
