"""hostPath directories a non-root container is to write, which the kubelet creates root-owned.

Sources (Kubernetes v1.37): a hostPath volume of type DirectoryOrCreate is created by the kubelet where the
path is missing (pkg/volume/hostpath/host_path.go, through k8s.io/mount-utils MakeDir: os.MkdirAll with mode
0755, owned by the kubelet's user, root); the kubelet changes the ownership of a volume to the pod's fsGroup
only for volume types that support ownership management, and hostPath is not one (docs "Volumes: hostPath":
"files or directories created on the underlying hosts are only writable by root"). So a container that runs
as another UID cannot write a directory the kubelet made; one the node already has is writable or not by its
own owner and mode, which only the node tells.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kvtier.manifests import at, container_paths, pod_templates, subject
from kvtier.validate.checks.kubelet_rules import effective
from kvtier.validate.rules import Hit, ManifestsContext, rule

CREATES = "DirectoryOrCreate"


def _created_dirs(spec: dict[str, Any], where: str) -> dict[str, tuple[str, str]]:
    """Volume name -> (host path, rendered field) of each hostPath volume the kubelet creates if missing."""
    out: dict[str, tuple[str, str]] = {}
    volumes = spec.get("volumes")
    for i, v in enumerate(volumes if isinstance(volumes, list) else []):
        host = v.get("hostPath") if isinstance(v, dict) else None
        if isinstance(host, dict) and host.get("type") == CREATES and isinstance(host.get("path"), str):
            out[str(v.get("name"))] = (host["path"], f"{where}.volumes[{i}].hostPath.path")
    return out


def non_root(spec: dict[str, Any], where: str, c: dict[str, Any], path: str) -> tuple[str, str] | None:
    """(who the container runs as, the rendered field that says so) when it is surely not root, else None
    (root, or the image's user, which may be root)."""
    uid, uid_at = effective("runAsUser", spec, where, c, path)
    if isinstance(uid, int) and not isinstance(uid, bool):
        return (f"UID {uid}", uid_at) if uid != 0 else None
    nonroot, nonroot_at = effective("runAsNonRoot", spec, where, c, path)
    # With runAsNonRoot and no runAsUser the kubelet starts only an image whose user is a non-zero UID.
    return ("the image's non-root user (runAsNonRoot)", nonroot_at) if nonroot is True else None


@rule(
    "hostpath-writable-by-user",
    scope="manifests",
    reason="a hostPath of type DirectoryOrCreate that is missing on the node is created by the kubelet owned "
    "by root with mode 0755 (k8s.io/kubernetes pkg/volume/hostpath, k8s.io/mount-utils MakeDir), and fsGroup "
    "does not apply to hostPath volumes (docs 'Volumes: hostPath'): a container running as a non-root UID "
    "that writes there gets permission denied (Curvine's worker cannot create its data dir and exits). "
    "Whether the directory already exists on the node, and with which owner and mode, decides: a warning",
    remedy="run the writing container as root (the Curvine chart's worker default, curvine.worker."
    "podSecurityContext runAsUser: 0), or create the directory on every node, owned by that UID, before the "
    "pod starts (the node's bootstrap or a root init step)",
)
def hostpath_writable(ctx: ManifestsContext) -> Iterator[Hit]:
    for m, where, spec in pod_templates(ctx.manifests):
        if at(spec, "os.name") == "windows":
            continue  # no UIDs on Windows nodes
        dirs = _created_dirs(spec, where)
        if not dirs:
            continue
        for path, c in container_paths(spec, where):
            user = non_root(spec, where, c, path)
            mounts = c.get("volumeMounts")
            if user is None or not isinstance(mounts, list):
                continue
            for mount in mounts:
                if (
                    not isinstance(mount, dict)
                    or mount.get("readOnly") is True
                    or mount.get("name") not in dirs
                ):
                    continue
                host, _ = dirs[str(mount["name"])]
                yield Hit(
                    f"container {c.get('name')} runs as {user[0]} and writes the hostPath {host} "
                    f"(type {CREATES}, mounted at {mount.get('mountPath')}): where the node lacks it the "
                    "kubelet creates it root-owned with mode 0755, which this user cannot write, and fsGroup "
                    "does not change a hostPath's owner. What decides: whether the directory exists on every "
                    "node the pod may land on and is writable by that user; check with `kubectl debug "
                    f"node/<node> -it --image=busybox -- ls -ld /host{host}`. Run the container as root, or "
                    "create the directory with that owner on the nodes first",
                    subject=subject(m),
                    manifest_path=user[1],
                    severity="warning",
                )


__all__ = ["non_root"]
