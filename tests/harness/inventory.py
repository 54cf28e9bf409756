"""What a Helm release leaves in the cluster: used to prove an uninstall leaves no orphans."""

from __future__ import annotations

from kvtier.cluster.common import discovery
from kvtier.cluster.common.rest import ApiException, Rest

# Objects every namespace has, or that exist by design after an uninstall.
NAMESPACE_DEFAULTS = {("ServiceAccount", "default"), ("ConfigMap", "kube-root-ca.crt")}
KEPT_BY_DESIGN = {"PersistentVolumeClaim"}  # StatefulSet claims and `helm.sh/resource-policy: keep` claims
NOT_OBJECTS = {"Event", "Binding", "ComponentStatus"}  # records, not things a release owns


def _listable(rest: Rest) -> list[discovery.Resource]:
    out, seen = [], set()
    for group_version in discovery.group_versions(rest):
        for resource in discovery.resources(rest, group_version):
            key = (resource.group, resource.kind)
            if "list" in resource.verbs and resource.kind not in NOT_OBJECTS and key not in seen:
                seen.add(key)
                out.append(resource)
    return out


def leftovers(rest: Rest, release: str, namespace: str) -> list[str]:
    """`Kind/name` of everything in `namespace`, and every cluster-scoped object of `release`, still present.

    Namespace defaults and PersistentVolumeClaims are not counted.
    """
    found = []
    for resource in _listable(rest):
        path = resource.namespaced_path(namespace) if resource.namespaced else resource.path
        try:
            items = rest.get(path)["items"]
        except ApiException as error:
            if error.status in (403, 404, 405):
                continue
            raise
        for item in items:
            meta = item["metadata"]
            if resource.namespaced:
                if (resource.kind, meta["name"]) in NAMESPACE_DEFAULTS or resource.kind in KEPT_BY_DESIGN:
                    continue
            elif not _belongs(meta, release, namespace):
                continue
            found.append(f"{resource.kind}/{meta['name']}")
    return sorted(found)


def _belongs(meta: dict, release: str, namespace: str) -> bool:
    notes = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    by_helm = (notes.get("meta.helm.sh/release-name"), notes.get("meta.helm.sh/release-namespace")) == (
        release,
        namespace,
    )
    return by_helm or labels.get("app.kubernetes.io/instance") == release


def remove_cluster_scoped(rest: Rest, release: str, namespace: str) -> list[str]:
    """Delete cluster-scoped objects of `release` (CSIDriver, StorageClass, ClusterRoles...) left behind.

    Test clean-up after a failed uninstall, so one failure does not break the next install of the chart.
    """
    removed = []
    for resource in _listable(rest):
        if resource.namespaced or "delete" not in resource.verbs:
            continue
        try:
            items = rest.get(resource.path)["items"]
        except ApiException as error:
            if error.status in (403, 404, 405):
                continue
            raise
        for item in items:
            if _belongs(item["metadata"], release, namespace):
                rest.delete(f"{resource.path}/{item['metadata']['name']}")
                removed.append(f"{resource.kind}/{item['metadata']['name']}")
    return removed
