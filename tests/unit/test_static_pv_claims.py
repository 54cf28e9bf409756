"""Which claims a rendered release makes, so each static PV can be reserved for one of them."""

from __future__ import annotations

from harness.storage import claim_refs, claims_needed

MANIFESTS = [
    {
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "r-l2cache"},
        "spec": {"storageClassName": "r-curvine"},
    },
    {
        "kind": "StatefulSet",
        "metadata": {"name": "r-curvine-master", "namespace": "other"},
        "spec": {"replicas": 3, "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {}}]},
    },
    {"kind": "Deployment", "metadata": {"name": "ignored"}, "spec": {}},
]


def test_claim_refs_name_every_claim_statefulset_claims_by_ordinal() -> None:
    assert claim_refs(MANIFESTS, "ns") == {
        "r-curvine": [("ns", "r-l2cache")],
        "": [("other", f"data-r-curvine-master-{i}") for i in range(3)],
    }


def test_claim_refs_agree_with_the_counts() -> None:
    refs = claim_refs(MANIFESTS, "ns")
    assert {cls: len(claims) for cls, claims in refs.items()} == claims_needed(MANIFESTS)
