"""What `helm package --sign` will find in a binary OpenPGP keyring: each key's user IDs, fingerprint,
whether its secret part is there and whether a passphrase protects it.

Helm reads the keyring itself (Go OpenPGP, binary format only), so kvtier needs no gpg to sign. Reading
the packets here lets `kvtier package` refuse a wrong `--key` or `--keyring` before anything is built,
and write the fingerprint of the key Helm actually signs with into the `artifacthub.io/signKey`
annotation. Packet layout: RFC 4880 sections 4.2 (headers), 5.5 (key packets) and 12.2 (v4 fingerprint).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from kvtier.errors import UserError

SECRET_KEY, PUBLIC_KEY, USER_ID = 5, 6, 13
# Public-key algorithm -> its public fields: "m" an MPI, "o" a curve OID, "k" ECDH KDF parameters,
# an int a fixed-size octet string (RFC 9580 native curves).
_PUBLIC_FIELDS: dict[int, tuple[str | int, ...]] = {
    1: ("m", "m"),  # RSA
    2: ("m", "m"),
    3: ("m", "m"),
    16: ("m", "m", "m"),  # Elgamal
    20: ("m", "m", "m"),
    17: ("m", "m", "m", "m"),  # DSA
    18: ("o", "m", "k"),  # ECDH
    19: ("o", "m"),  # ECDSA
    22: ("o", "m"),  # EdDSA (legacy)
    25: (32,),  # X25519
    26: (56,),  # X448
    27: (32,),  # Ed25519
    28: (57,),  # Ed448
}


@dataclass
class Key:
    fingerprint: str  # upper-case hex, as gpg and Artifact Hub show it
    user_ids: list[str] = field(default_factory=list)
    secret: bool = False  # the keyring holds the private key (an export with --export-secret-keys)
    protected: bool = False  # the private key needs a passphrase


def _packets(data: bytes, where: Path) -> list[tuple[int, bytes]]:
    packets, pos = [], 0
    while pos < len(data):
        head = data[pos]
        if not head & 0x80:
            raise UserError(f"{where}: not an OpenPGP keyring (bad packet header at byte {pos})")
        if head & 0x40:  # new format
            tag, first = head & 0x3F, data[pos + 1]
            if first < 192:
                size, pos = first, pos + 2
            elif first < 224:
                size, pos = ((first - 192) << 8) + data[pos + 2] + 192, pos + 3
            elif first == 255:
                size, pos = int.from_bytes(data[pos + 2 : pos + 6], "big"), pos + 6
            else:
                raise UserError(f"{where}: partial-length packets do not occur in keyrings")
        else:  # old format
            tag, kind = (head >> 2) & 0x0F, head & 0x03
            width = {0: 1, 1: 2, 2: 4}.get(kind)
            if width is None:
                size, pos = len(data) - pos - 1, pos + 1
            else:
                size, pos = int.from_bytes(data[pos + 1 : pos + 1 + width], "big"), pos + 1 + width
        if pos + size > len(data):
            raise UserError(f"{where}: truncated OpenPGP packet (tag {tag})")
        packets.append((tag, data[pos : pos + size]))
        pos += size
    return packets


def _public_length(body: bytes, where: Path) -> int:
    """Length of the public part at the start of a v4 key packet body."""
    if body[0] != 4:
        raise UserError(f"{where}: a version {body[0]} key; only version 4 keys (what gpg makes) are read")
    algorithm = body[5]
    if algorithm not in _PUBLIC_FIELDS:
        raise UserError(f"{where}: public-key algorithm {algorithm} is not one Helm can sign with")
    pos = 6
    for part in _PUBLIC_FIELDS[algorithm]:
        if isinstance(part, int):
            pos += part
        elif part == "m":
            pos += 2 + (int.from_bytes(body[pos : pos + 2], "big") + 7) // 8
        else:  # "o" and "k": a length octet, then that many octets
            pos += 1 + body[pos]
    return pos


def read(path: Path) -> list[Key]:
    """Every primary key in a binary keyring, in file order."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise UserError(f"--keyring {path}: cannot read it ({error.strerror})") from None
    if data.lstrip().startswith(b"-----BEGIN PGP"):
        raise UserError(
            f"--keyring {path} is ASCII-armored; Helm reads binary keyrings only: export it without "
            "--armor (gpg --export-secret-keys KEY > FILE) or convert it with gpg --dearmor"
        )
    keys: list[Key] = []
    for tag, body in _packets(data, path):
        if tag in (SECRET_KEY, PUBLIC_KEY):
            public = body[: _public_length(body, path)]
            digest = hashlib.sha1(b"\x99" + len(public).to_bytes(2, "big") + public).hexdigest()
            protected = tag == SECRET_KEY and body[len(public)] != 0  # S2K usage 0: stored in the clear
            keys.append(Key(digest.upper(), secret=tag == SECRET_KEY, protected=protected))
        elif tag == USER_ID and keys:
            keys[-1].user_ids.append(body.decode("utf-8", "replace"))
    if not keys:
        raise UserError(f"--keyring {path} holds no keys")
    return keys


def find(keys: list[Key], name: str, where: Path) -> Key:
    """The key `helm package --key NAME` signs with: a user ID equal to NAME, else the only key with
    a user ID containing NAME (Helm 3.22 and 4.3 pkg/provenance/sign.go, NewFromKeyring)."""
    for key in keys:
        if name in key.user_ids:
            return key
    # Helm counts user IDs, not keys: two IDs of one key that both contain NAME are ambiguous too.
    matches = [k for k in keys for uid in k.user_ids if name in uid]
    listed = "; ".join(uid for k in keys for uid in k.user_ids) or "none"
    if not matches:
        raise UserError(
            f"--key {name!r}: no key in --keyring {where} has a user ID containing it (user IDs: {listed}); "
            "pass a name or e-mail of one of them"
        )
    if len(matches) > 1:
        raise UserError(
            f"--key {name!r} matches {len(matches)} user IDs in --keyring {where} (user IDs: {listed}); "
            "give the full user ID or an e-mail that only one key has"
        )
    return matches[0]
