"""Pod Security Standards: the level each pod needs, checked against its namespace's level."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kvtier.manifests import containers, pod_spec, pod_templates, subject
from kvtier.validate.findings import POLICY
from kvtier.validate.options import POD_SECURITY_LEVELS
from kvtier.validate.rules import Hit, ManifestsContext, rule

LEVELS = POD_SECURITY_LEVELS
# volume types a `restricted` pod may use
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
    "name",
}
# capabilities a `baseline` pod may add
BASELINE_CAPS = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}


def required_level(spec: dict[str, Any]) -> tuple[str, list[str]]:
    """The least Pod Security Standards level the pod meets, and why it needs more than restricted."""
    baseline, restricted = [], []
    if spec.get("hostNetwork") or spec.get("hostPID") or spec.get("hostIPC"):
        baseline.append("host namespaces")
    for v in spec.get("volumes") or []:
        if "hostPath" in v:
            baseline.append(f"hostPath volume {v.get('name')}")
        elif not set(v) <= RESTRICTED_VOLUMES:
            restricted.append(f"volume type {sorted(set(v) - RESTRICTED_VOLUMES)}")
    pod_sc = spec.get("securityContext") or {}
    for _, _, c in containers(spec):
        sc = c.get("securityContext") or {}
        name = c.get("name")
        if sc.get("privileged"):
            baseline.append(f"{name} privileged")
        added = set((sc.get("capabilities") or {}).get("add") or [])
        if added - BASELINE_CAPS:
            baseline.append(f"{name} adds {sorted(added - BASELINE_CAPS)}")
        if added - {"NET_BIND_SERVICE"}:
            restricted.append(f"{name} adds capabilities")
        if any(p.get("hostPort") for p in c.get("ports") or []):
            baseline.append(f"{name} hostPort")
        if sc.get("allowPrivilegeEscalation") is not False:
            restricted.append(f"{name} may escalate privileges")
        if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
            restricted.append(f"{name} does not drop ALL capabilities")
        if not sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")):
            restricted.append(f"{name} may run as root")
        if sc.get("runAsUser", pod_sc.get("runAsUser")) == 0:
            restricted.append(f"{name} runs as UID 0")
        seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
        if seccomp == "Unconfined":
            baseline.append(f"{name} seccomp Unconfined")
        elif seccomp not in ("RuntimeDefault", "Localhost"):
            restricted.append(f"{name} has no RuntimeDefault seccomp profile")
    if baseline:
        return "privileged", baseline
    return ("baseline", restricted) if restricted else ("restricted", [])


@rule(
    "policy-pod-security",
    scope="manifests",
    check_name=POLICY,
    reason="a pod above its namespace's Pod Security level is rejected at admission (pods never start)",
    remedy="lower the pod's privileges, or label its namespace pod-security.kubernetes.io/enforce=<level> "
    "and tell kvtier with --pod-security NAMESPACE=LEVEL",
)
def pod_security(ctx: ManifestsContext) -> Iterator[Hit]:
    for m, _, spec in pod_templates(ctx.manifests):
        namespace = (m.get("metadata") or {}).get("namespace") or ctx.namespace
        allowed = ctx.pod_security.get(namespace)
        if allowed is None:
            continue
        level, why = required_level(spec)
        if LEVELS.index(level) > LEVELS.index(allowed):
            yield Hit(
                f"needs Pod Security {level!r} but namespace {namespace} enforces {allowed!r}: "
                f"{'; '.join(why[:4])}",
                subject=subject(m),
            )


def pod_security_summary(manifests: list[dict[str, Any]], namespace: str, declared: dict[str, str]) -> str:
    """Which Pod Security level each namespace needs, and why (what a platform team must label)."""
    needed: dict[str, tuple[str, list[str]]] = {}
    for m in manifests:
        spec = pod_spec(m)
        if spec is None:
            continue
        ns = (m.get("metadata") or {}).get("namespace") or namespace
        level, why = required_level(spec)
        current = needed.get(ns, ("restricted", []))
        if LEVELS.index(level) > LEVELS.index(current[0]):
            needed[ns] = (level, [f"{subject(m)}: {why[0]}"] if why else [])
        elif level == current[0] and why:
            needed[ns] = (level, [*current[1], f"{subject(m)}: {why[0]}"])
    parts = []
    for ns, (level, why) in sorted(needed.items()):
        state = f"enforces {declared[ns]}" if ns in declared else "level not declared (--pod-security)"
        parts.append(
            f"namespace {ns} needs Pod Security {level!r} ({state})"
            + (f": {'; '.join(why[:3])}" if why else "")
        )
    return "; ".join(parts)
