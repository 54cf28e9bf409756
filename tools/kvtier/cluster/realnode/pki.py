"""Certificates of the real-node cluster, made with openssl: one CA, the API server's serving
certificate (valid for the node address, the `kubernetes` Service address and its DNS names), one
admin client certificate that every component uses (system:masters; a test cluster, not a production
identity scheme) and the service-account signing key. ECDSA P-256 keys: fast to make."""

from __future__ import annotations

import subprocess
from pathlib import Path

from kvtier.cluster.realnode import netns
from kvtier.errors import UserError

DAYS = "30"
API_NAMES = [
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
    "localhost",
]


def _openssl(*args: str) -> None:
    proc = subprocess.run(["openssl", *args], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise UserError(f"`openssl {' '.join(args[:2])}` failed: {proc.stderr.strip()[-1000:]}")


def _key(path: Path) -> None:
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(path))


def _signed(folder: Path, name: str, subject: str, extensions: str) -> None:
    _key(folder / f"{name}.key")
    (folder / f"{name}.ext").write_text(extensions)
    _openssl(
        "req",
        "-new",
        "-key",
        str(folder / f"{name}.key"),
        "-subj",
        subject,
        "-out",
        str(folder / f"{name}.csr"),
    )
    _openssl(
        "x509", "-req", "-in", str(folder / f"{name}.csr"), "-CA", str(folder / "ca.crt"),
        "-CAkey", str(folder / "ca.key"), "-CAcreateserial", "-days", DAYS,
        "-extfile", str(folder / f"{name}.ext"), "-out", str(folder / f"{name}.crt"),
    )  # fmt: skip


def create(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    _key(folder / "ca.key")
    _openssl(
        "req", "-x509", "-new", "-key", str(folder / "ca.key"), "-subj", "/CN=kvtier-real-node-ca",
        "-days", DAYS, "-out", str(folder / "ca.crt"),
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    sans = [f"IP:{ip}" for ip in (netns.NODE_IP, netns.API_SERVICE_IP, "127.0.0.1")] + [
        f"DNS:{name}" for name in API_NAMES
    ]
    _signed(
        folder,
        "apiserver",
        "/CN=kube-apiserver",
        f"subjectAltName={','.join(sans)}\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature\n",
    )
    _signed(
        folder,
        "admin",
        "/O=system:masters/CN=kvtier-admin",
        "extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature\n",
    )
    _key(folder / "sa.key")
    _openssl("ec", "-in", str(folder / "sa.key"), "-pubout", "-out", str(folder / "sa.pub"))
