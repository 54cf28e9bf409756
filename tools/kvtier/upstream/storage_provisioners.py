"""Which access modes the common StorageClass provisioners give, and which provisioner the common class names
stand for: the facts behind `kvtier validate`'s l2-storageclass-gives-rwx rule.

Access modes: the Kubernetes CSI drivers list (kubernetes-csi/docs, book/src/drivers.md: ebs.csi.aws.com
"Read/Write Single Pod", efs.csi.aws.com and fsx.csi.aws.com "Read/Write Multiple Pods") and the in-tree
plugins' table in the Kubernetes documentation (concepts/storage/persistent-volumes, "Access Modes":
AWSElasticBlockStore ReadWriteOnce only). A block device (EBS) attaches to one node at a time, so a
ReadWriteMany claim on it is never provisioned and stays Pending; file systems (EFS, FSx for Lustre) give it.
Curvine's CSI driver registers as `curvine` (charts/curvine/templates/storage-storageclass.yaml) and mounts
one FUSE file system on every node: tests/node/test_curvine_release.py provisions a ReadWriteMany claim on it
(ReadWriteOnce: the static PV of CurvineIO/curvine-doc, docs/3-User-Manuals/07-csi.md).

Class names: what EKS and the AWS drivers' own examples call them. EKS creates `gp2` on every cluster
(in-tree kubernetes.io/aws-ebs; the EKS user guide, "Storage classes"); the aws-ebs-csi-driver examples
name `ebs-sc` (examples/kubernetes/dynamic-provisioning) and EKS Auto Mode's guide `gp3`/`auto-ebs-sc`;
the aws-efs-csi-driver examples `efs-sc`, the aws-fsx-csi-driver examples `fsx-sc`. A name is a
convention, not a guarantee: a cluster may give it to another provisioner, so the rule judges the class a
cluster serves where it can read it, and a name alone gives at most a warning that names the assumption and
how to check it.
"""

from __future__ import annotations

RWX = "ReadWriteMany"

# provisioner -> the access modes its volumes can give
ACCESS_MODES: dict[str, tuple[str, ...]] = {
    "ebs.csi.aws.com": ("ReadWriteOnce", "ReadWriteOncePod"),
    "kubernetes.io/aws-ebs": ("ReadWriteOnce",),
    "efs.csi.aws.com": ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"),
    "fsx.csi.aws.com": ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"),
    "curvine": ("ReadWriteOnce", "ReadWriteMany"),
}

# StorageClass name -> the provisioner EKS or the AWS drivers' examples give that name
CLASS_PROVISIONERS: dict[str, str] = {
    "gp2": "kubernetes.io/aws-ebs",
    "gp3": "ebs.csi.aws.com",
    "ebs-sc": "ebs.csi.aws.com",
    "auto-ebs-sc": "ebs.csi.aws.com",
    "efs-sc": "efs.csi.aws.com",
    "fsx-sc": "fsx.csi.aws.com",
}


def provisioner_of(storage_class: str) -> str | None:
    """The provisioner a class name conventionally stands for, if it is one of the common ones."""
    return CLASS_PROVISIONERS.get(storage_class)


def gives_rwx(provisioner: str) -> bool | None:
    """Whether volumes of `provisioner` can be ReadWriteMany; None for a provisioner not listed here."""
    modes = ACCESS_MODES.get(provisioner)
    return None if modes is None else RWX in modes
