"""Static PersistentVolumes: KWOK has no CSI driver, so nothing would provision a claim.

Tests pre-create PVs for the storage classes a release uses (the Curvine class `<release>-curvine`, the
masters' meta/journal class); the PV controller then binds the claims as it would on a real cluster.
The volumes are hostPath, which needs no attach step; no kubelet ever mounts them.
"""

from __future__ import annotations

import secrets
from typing import Any

from kvtier.cluster.common.rest import ApiException, Rest

LABEL = "kvtier.io/static-pv-for"  # value: the owner (e.g. a release name), for clean-up


def create(
    rest: Rest,
    owner: str,
    storage_class: str,
    count: int,
    size: str = "10Ti",
    claims: list[tuple[str, str]] | None = None,
) -> list[str]:
    """`count` Retain PVs of `storage_class`, usable as RWO or RWX claims up to `size`.

    With `claims` ((namespace, name) per PV), each PV is reserved for that claim (`claimRef`), so a
    claim left pending by an earlier test can never take it.
    """
    names = []
    for index in range(count):
        # A random part: a deleted PV lingers while a claim still holds it, and the owner may come back.
        name = f"static-{owner}-{storage_class or 'noclass'}-{index}-{secrets.token_hex(3)}"[:253]
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name, "labels": {LABEL: owner}},
            "spec": {
                "capacity": {"storage": size},
                "accessModes": ["ReadWriteOnce", "ReadWriteMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": storage_class,
                "hostPath": {"path": f"/var/lib/kvtier-fake/{name}"},
            },
        }
        if claims:
            namespace, claim = claims[index]
            body["spec"]["claimRef"] = {"namespace": namespace, "name": claim}
        rest.post("/api/v1/persistentvolumes", body)
        names.append(name)
    return names


def delete(rest: Rest, owner: str) -> int:
    """Delete every static PV created for `owner`; returns how many."""
    pvs = rest.get("/api/v1/persistentvolumes", labelSelector=f"{LABEL}={owner}")["items"]
    for pv in pvs:
        try:
            rest.delete(f"/api/v1/persistentvolumes/{pv['metadata']['name']}")
        except ApiException as error:
            # A PV listed while terminating (pv-protection holds it until its claim is gone) can be gone
            # by the time it is deleted: what this wanted.
            if error.status != 404:
                raise
    return len(pvs)


def claims_needed(manifests: list[dict]) -> dict[str, int]:
    """Claims per storage class ("" = none) that rendered objects make: PVCs, StatefulSet claim templates."""
    needed: dict[str, int] = {}
    for obj in manifests:
        if obj.get("kind") == "PersistentVolumeClaim":
            claims, copies = [obj], 1
        elif obj.get("kind") == "StatefulSet":
            claims, copies = (
                obj["spec"].get("volumeClaimTemplates") or [],
                int(obj["spec"].get("replicas", 1)),
            )
        else:
            continue
        for claim in claims:
            storage_class = claim.get("spec", {}).get("storageClassName") or ""
            needed[storage_class] = needed.get(storage_class, 0) + copies
    return needed


def claim_refs(manifests: list[dict], namespace: str) -> dict[str, list[tuple[str, str]]]:
    """Storage class ("" = none) -> the (namespace, name) of every claim the rendered objects make."""
    refs: dict[str, list[tuple[str, str]]] = {}
    for obj in manifests:
        ns = obj.get("metadata", {}).get("namespace") or namespace
        if obj.get("kind") == "PersistentVolumeClaim":
            named = [(obj, obj["metadata"]["name"])]
        elif obj.get("kind") == "StatefulSet":
            sts, replicas = obj["metadata"]["name"], int(obj["spec"].get("replicas", 1))
            named = [
                (template, f"{template['metadata']['name']}-{sts}-{ordinal}")
                for template in obj["spec"].get("volumeClaimTemplates") or []
                for ordinal in range(replicas)
            ]
        else:
            continue
        for claim, name in named:
            storage_class = claim.get("spec", {}).get("storageClassName") or ""
            refs.setdefault(storage_class, []).append((ns, name))
    return refs
