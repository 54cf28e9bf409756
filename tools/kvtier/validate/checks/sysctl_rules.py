"""The pod's sysctls as the API server and then the kubelet judge them.

Sources (Kubernetes v1.37, the version toolchain/versions.env pins):
- names: pkg/apis/core/validation (validateSysctls: each name a dotted or slashed run of lowercase segments,
  at most 253 characters, none twice, and no net.* sysctl with hostNetwork);
- the kubelet's admission: pkg/kubelet/sysctl/allowlist.go (a pod whose sysctl is off the allowlist, or a net
  sysctl with hostNetwork, an IPC one with hostIPC, is refused with reason SysctlForbidden);
- the allowlist: pkg/kubelet/sysctl/safe_sysctls.go (the safe set) plus the node's --allowed-unsafe-sysctls,
  which the kubelet accepts only for sysctls the kernel namespaces (k8s.io/component-helpers
  node/util/sysctl NamespacedBy); docs "Using sysctls in a Kubernetes Cluster".
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from kvtier.manifests import pod_templates, subject
from kvtier.validate.findings import Severity
from kvtier.validate.rules import Hit, ManifestsContext, rule

_SEGMENT = r"[a-z0-9]([-_a-z0-9]*[a-z0-9])?"
NAME = re.compile(rf"^({_SEGMENT}[./])*{_SEGMENT}$")
MAX_NAME = 253

# The kubelet's safe set. A few need a newer kernel than 4.6 to be namespaced (the kubelet drops them on
# older kernels); every node image the chart targets runs 5.10 or later.
SAFE = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem",
    }
)
# What the kernel isolates per pod, by exact name or prefix: only these may ever be allowed.
_EXACT = {"kernel.sem": "ipc"}
_PREFIX = {"kernel.shm": "ipc", "kernel.msg": "ipc", "fs.mqueue.": "ipc", "net.": "net"}
_HOST_FLAG = {"net": "hostNetwork", "ipc": "hostIPC"}

CHECK_NODE = (
    "check with `kubectl get --raw /api/v1/nodes/<node>/proxy/configz` (kubeletconfig.allowedUnsafeSysctls) "
    "on the nodes the pod may land on"
)


def dotted(name: str) -> str:
    """The name as the kubelet compares it: one written with / first swaps its / and . (net/ipv4/conf/eth0.1
    is net.ipv4.conf.eth0/1)."""
    first = re.search(r"[./]", name)
    if first is None or first.group() == ".":
        return name
    return name.translate(str.maketrans("./", "/."))


def namespace(name: str) -> str | None:
    """The kernel namespace that isolates the sysctl (ipc or net), None where it is node-wide."""
    if name in _EXACT:
        return _EXACT[name]
    return next((ns for p, ns in _PREFIX.items() if name.startswith(p)), None)


def judge(written: Any, host: dict[str, bool]) -> tuple[Severity, str] | None:
    """(severity, why) for one sysctl name in a pod with the given host namespaces, None when admitted."""
    if not isinstance(written, str) or len(written) > MAX_NAME or not NAME.match(written):
        return "error", (
            f"the API server refuses the name {written!r}: lowercase segments of letters, digits, - and _ "
            f"joined by . or /, at most {MAX_NAME} characters"
        )
    name = dotted(written)
    ns = namespace(name)
    if ns is None:
        return "error", (
            f"{name} is node-wide, not namespaced by the kernel, so no kubelet may allow it (it refuses "
            "such names in --allowed-unsafe-sysctls) and the pod is refused with SysctlForbidden; set it on "
            "the node (a DaemonSet or the node's bootstrap), not in the pod"
        )
    flag = _HOST_FLAG[ns]
    if host.get(flag):
        return "error", (
            f"{name} lives in the {ns} namespace, which this pod shares with the node ({flag}: true): the "
            f"kubelet refuses it with SysctlForbidden; drop the sysctl or {flag}"
        )
    if name not in SAFE:
        return "warning", (
            f"{name} is namespaced but not in the kubelet's safe set: the pod is refused with "
            f"SysctlForbidden unless every node it may land on allows it in --allowed-unsafe-sysctls; "
            f"{CHECK_NODE}"
        )
    return None


@rule(
    "kube-sysctl-admitted",
    scope="manifests",
    reason="the API server admits a pod whose sysctls the kubelet then refuses at admission (Pod Failed, "
    "reason SysctlForbidden, k8s.io/kubernetes pkg/kubelet/sysctl/allowlist.go): the kubelet allows only its "
    "safe set (pkg/kubelet/sysctl/safe_sysctls.go) and the node's --allowed-unsafe-sysctls, which may "
    "name only sysctls the kernel namespaces (kernel.sem, kernel.shm*, kernel.msg*, fs.mqueue.*, net.*), "
    "and never a net sysctl with hostNetwork or an IPC one with hostIPC; the API server refuses malformed or "
    "repeated names (pkg/apis/core/validation validateSysctls). Docs: 'Using sysctls in a Kubernetes "
    "Cluster'",
    remedy="set node-wide sysctls (vm.*, fs.* but fs.mqueue.*, most kernel.*) on the node, not the pod; for "
    "a namespaced one outside the safe set, allow it in the kubelet's allowedUnsafeSysctls on the nodes "
    "first; never a net.* sysctl in a hostNetwork pod",
)
def sysctls_admitted(ctx: ManifestsContext) -> Iterator[Hit]:
    for m, where, spec in pod_templates(ctx.manifests):
        sc = spec.get("securityContext")
        listed = sc.get("sysctls") if isinstance(sc, dict) else None
        host = {f: spec.get(f) is True for f in ("hostNetwork", "hostIPC")}
        seen: set[str] = set()
        for i, item in enumerate(listed if isinstance(listed, list) else []):
            written = item.get("name") if isinstance(item, dict) else None
            field = f"{where}.securityContext.sysctls[{i}].name"
            # The API server compares names as written (net/ipv4/x and net.ipv4.x are not duplicates).
            if isinstance(written, str) and written in seen:
                yield Hit(
                    f"sysctl {written} is set twice: the API server refuses the pod "
                    "(Duplicate value); keep one",
                    subject=subject(m),
                    manifest_path=field,
                )
                continue
            if isinstance(written, str):
                seen.add(written)
            verdict = judge(written, host)
            if verdict is not None:
                severity, why = verdict
                yield Hit(
                    f"sysctl {written}: {why}", subject=subject(m), manifest_path=field, severity=severity
                )


__all__ = ["SAFE", "dotted", "judge", "namespace"]
