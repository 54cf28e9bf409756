"""The kwokctl configuration of the test cluster: local binaries only, loopback only, our stages.

Field names are those of the pinned kwok's `KwokctlConfiguration` (config.kwok.x-k8s.io/v1alpha1). Every
binary is a local path, so kwokctl never downloads anything; `bindAddress` keeps every port on loopback.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from kvtier import paths
from kvtier.toolchain import versions

STAGES_FILE = paths.ROOT / "toolchain" / "kwok" / "stages.yaml"
# Every component binds here. (The API server still advertises the host's own address as the `kubernetes`
# Service endpoint: it refuses a loopback advertise address. Nothing here dials that endpoint.)
BIND_ADDRESS = "127.0.0.1"
COMPONENTS = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller"]
# The controller manager and the scheduler exit when they cannot renew their leader lease in time (10 s by
# default, each try 5 s). A test run on two busy cores once stalled the API server past that; the controller
# manager exited and every namespace made after it had no `default` ServiceAccount, so the server refused
# every pod there. Each is the only instance: a slow renewal is no reason to stop.
LEADER_ELECTION = {
    "leader-elect-lease-duration": "180s",
    "leader-elect-renew-deadline": "150s",
    "leader-elect-retry-period": "10s",
}


def admission_policy_switches(minor: int) -> tuple[str, str]:
    """(runtime-config, feature-gates) that serve MutatingAdmissionPolicy on Kubernetes 1.<minor>.

    KEP-3962: alpha in 1.32 (v1alpha1), beta in 1.34 (v1beta1, gate off by default), GA in 1.36
    (v1, on by default). Where v1 is served we also serve v1beta1, so the bundle's policy for
    1.34/1.35 clusters can be tested on the same API server.
    """
    if minor >= 36:
        return "admissionregistration.k8s.io/v1beta1=true", ""
    if minor >= 34:
        return "admissionregistration.k8s.io/v1beta1=true", "MutatingAdmissionPolicy=true"
    if minor >= 32:
        return "admissionregistration.k8s.io/v1alpha1=true", "MutatingAdmissionPolicy=true"
    raise ValueError(f"Kubernetes 1.{minor} has no MutatingAdmissionPolicy (needs 1.32 or newer)")


def render(
    binaries: dict[str, Path], minor: int, runtime_config_extra: str = "", feature_gates_extra: str = ""
) -> str:
    """The multi-document YAML passed to `kwokctl create cluster --config`.

    The extras are appended to --runtime-config / --feature-gates (e.g. to switch an API off for a test).
    """
    runtime_config, feature_gates = admission_policy_switches(minor)
    runtime_config = ",".join(part for part in (runtime_config, runtime_config_extra) if part)
    feature_gates = ",".join(part for part in (feature_gates, feature_gates_extra) if part)
    pinned = versions()
    options = {
        "runtime": "binary",
        "bindAddress": BIND_ADDRESS,
        "components": COMPONENTS,
        "kubeVersion": pinned["KUBERNETES_VERSION"],
        "etcdVersion": pinned["ETCD_VERSION"],
        "kwokVersion": pinned["KWOK_VERSION"],
        "kubeApiserverBinary": str(binaries["kube-apiserver"]),
        "kubeControllerManagerBinary": str(binaries["kube-controller-manager"]),
        "kubeSchedulerBinary": str(binaries["kube-scheduler"]),
        "kubectlBinary": str(binaries["kubectl"]),
        "etcdBinary": str(binaries["etcd"]),
        "kwokControllerBinary": str(binaries["kwok"]),
        # TLS + RBAC + the default admission chain (Pod Security, ServiceAccount, policies) as in production.
        "securePort": True,
        "kubeAuthorization": True,
        "kubeAdmission": True,
        "kubeRuntimeConfig": runtime_config,
        "kubeFeatureGates": feature_gates,
    }
    config = {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokctlConfiguration",
        "options": {key: value for key, value in options.items() if value != ""},
        "componentsPatches": [
            {"name": name, "extraArgs": [{"key": k, "value": v} for k, v in LEADER_ELECTION.items()]}
            for name in ("kube-controller-manager", "kube-scheduler")
        ],
    }
    return yaml.safe_dump(config, sort_keys=False) + "---\n" + STAGES_FILE.read_text()
