"""What a cluster says a StorageClass is: its provisioner, read from the API server that judges the renders
(--server, or the default mode's dry run) or from --context's cluster, for l2-storageclass-gives-rwx.

A class name is only a convention (kvtier.upstream.storage_provisioners); the StorageClass object on the
cluster the release goes to is the fact. Each name is read once per run; a class that cannot be read says
why, so the rule can fall back to the name and say what it could not confirm.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import quote

STORAGE_CLASSES = "/apis/storage.k8s.io/v1/storageclasses"


@dataclass(frozen=True)
class ClusterClass:
    """One StorageClass as a cluster answered for it."""

    name: str
    where: str  # the cluster, in words: "context prod", "the test cluster (https://127.0.0.1:6443)"
    provisioner: str = ""  # empty: not read, `problem` says why
    problem: str = ""  # "no StorageClass 'gp2' on context prod", "403 Forbidden", "did not answer: ..."
    # Not there, on the cluster the release goes to (not a control plane of validate's own, which holds
    # only the classes made on it): the claim would stay Pending.
    absent: bool = False


Reader = Callable[[str], ClusterClass]


def reader(rest: Any, where: str, release_cluster: bool) -> Reader:
    """A reader of StorageClasses through `rest` (a kvtier.cluster.common.rest.Rest), one GET per name;
    `release_cluster`: the cluster the release goes to, where a missing class is a finding."""
    import urllib3

    from kvtier.cluster.common.rest import ApiException

    @cache
    def read(name: str) -> ClusterClass:
        try:
            found = rest.find(f"{STORAGE_CLASSES}/{quote(name, safe='')}")
        except ApiException as error:
            return ClusterClass(name, where, problem=f"reading it on {where}: {error.status} {error.reason}")
        except (OSError, urllib3.exceptions.HTTPError) as error:
            return ClusterClass(name, where, problem=f"{where} did not answer: {error}")
        if not isinstance(found, dict):
            return ClusterClass(
                name, where, problem=f"no StorageClass {name!r} on {where}", absent=release_cluster
            )
        provisioner = found.get("provisioner")
        if not isinstance(provisioner, str) or not provisioner:
            return ClusterClass(name, where, problem=f"StorageClass {name!r} on {where} names no provisioner")
        return ClusterClass(name, where, provisioner)

    return read


__all__ = ["ClusterClass", "Reader", "reader"]
