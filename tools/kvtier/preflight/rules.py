"""Every preflight check, declared once: id, what it verifies (reason) and what to do when it fails."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    id: str
    reason: str
    remedy: str
    hyperpod_only: bool = False


SUPPORTED_MINORS = (30, 37)  # Kubernetes 1.30 (DESIGN.md section 1) .. the newest the tests run on

RULES: dict[str, Rule] = {
    rule.id: rule
    for rule in (
        Rule(
            "k8s-version",
            f"the API server's Kubernetes version is in the supported range "
            f"1.{SUPPORTED_MINORS[0]}..1.{SUPPORTED_MINORS[1]}",
            "upgrade the cluster to a supported version (newer than tested: proceed with care)",
        ),
        Rule(
            "rbac",
            "you may create every object the install renders (SelfSubjectAccessReview per kind)",
            "ask a cluster admin for a Role/ClusterRole granting the denied verbs, "
            "or install as someone who has them",
        ),
        Rule(
            "gpu-nodes",
            "for each model, the nodes kube-scheduler could put its rendered engine pods on (instance type "
            "and nodeSelector, taints against the pods' tolerations, cordons, requests; kvtier.scheduling) "
            "offer enough allocatable nvidia.com/gpu for all replicas",
            "add GPU nodes of the expected instance type (and the NVIDIA device plugin), tolerate their "
            "taints (a tolerations list in values replaces the chart's), or lower replicas / gpusPerReplica, "
            "or fix models[].instanceType",
        ),
        Rule(
            "nvme-nodes",
            "nodes the rendered Curvine worker DaemonSet can run on exist (its nodeSelector, taints against "
            "its tolerations, requests), ideally every GPU node the models use",
            "label the NVMe nodes to match curvine.worker.nodeSelector (or change it), and tolerate their "
            "taints in curvine.worker.tolerations",
        ),
        Rule(
            "storage-conflicts",
            "the CSIDriver `curvine` and the release's StorageClass are absent or already this release's, "
            "and a StorageClass/claim the values name exists",
            "uninstall the other Curvine, or set curvine.csi.enabled=false / curvine.storageClass.name, "
            "or create the named StorageClass/claim",
        ),
        Rule(
            "pod-security",
            "the release namespace's Pod Security `enforce` level lets Curvine's node components "
            "(CSI node plugin, workers with host paths) run privileged",
            "kubectl label namespace NS pod-security.kubernetes.io/enforce=privileged --overwrite "
            "(or run Curvine in its own privileged namespace)",
        ),
        Rule(
            "release-immutable",
            "an existing release keeps the fields that cannot change on upgrade (Curvine master count, "
            "HyperPod intelligent routing on/off)",
            "keep the installed value, or uninstall and reinstall (Curvine metadata is lost)",
        ),
        Rule(
            "hyperpod-crds",
            "the HyperPod Inference Operator's CRDs are installed and their schema has every field the "
            "bundle sets",
            "install/upgrade the HyperPod Inference Operator "
            "(EKS add-on amazon-sagemaker-hyperpod-inference)",
            hyperpod_only=True,
        ),
        Rule(
            "cert-manager",
            "cert-manager (required by the HyperPod Inference Operator) is installed",
            "install cert-manager (EKS add-on or its Helm chart) before the operator",
            hyperpod_only=True,
        ),
        Rule(
            "tiered-storage",
            "HyperPod's tiered-storage DaemonSet (aws-hyperpod/ai-toolkit) runs where an endpoint uses "
            "l2CacheBackend: tieredstorage",
            "enable tiered storage on the HyperPod cluster, or use the bundle's Curvine L2 (cache.l2)",
            hyperpod_only=True,
        ),
        Rule(
            "admission-policy",
            "the API server serves MutatingAdmissionPolicy (admissionregistration.k8s.io/v1, or v1beta1), "
            "which keeps the L2 patch on the operator's Deployments",
            "on 1.34/1.35 enable --runtime-config=admissionregistration.k8s.io/v1beta1=true and the "
            "MutatingAdmissionPolicy feature gate, or upgrade to 1.36+, or use the documented alternative",
            hyperpod_only=True,
        ),
    )
}
