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

SIGNATURE, SECRET_KEY, PUBLIC_KEY, TRUST, USER_ID = 2, 5, 6, 12, 13
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
    unsigned_ids: list[str] = field(default_factory=list)  # no signature after them: Helm drops them


def _damaged(where: Path, what: str) -> UserError:
    """A keyring that ends or breaks inside a packet: a partial copy or a damaged file."""
    return UserError(
        f"--keyring {where}: {what}; expected a whole binary OpenPGP keyring (the file is cut short or "
        f"damaged): export the key again with gpg --export-secret-keys KEY > {where}"
    )


def _header(data: bytes, pos: int, where: Path) -> tuple[int, int, int]:
    """(tag, header length, body length) of the packet starting at `pos` (RFC 4880 section 4.2)."""
    head = data[pos]
    if not head & 0x80:
        raise UserError(
            f"--keyring {where}: not an OpenPGP keyring (bad packet header at byte {pos}); expected the "
            "binary output of gpg --export-secret-keys KEY > FILE"
        )
    if head & 0x40:  # new format: the first length octet says how many length octets there are
        tag, first = head & 0x3F, data[pos + 1] if pos + 1 < len(data) else 0
        if 224 <= first < 255:
            raise _damaged(where, f"a partial-length packet at byte {pos}, which keyrings never hold")
        width = 1 if first < 192 else 2 if first < 224 else 5
    else:  # old format: the low two bits give the width; 3: the packet runs to the end of the file
        tag, width = (head >> 2) & 0x0F, (1, 2, 4, 0)[head & 0x03]
    length = data[pos + 1 : pos + 1 + width]
    if len(length) < width:
        raise _damaged(where, f"the file ends inside the header of the packet at byte {pos} (tag {tag})")
    if not head & 0x40:
        size = int.from_bytes(length, "big") if width else len(data) - pos - 1
    elif width == 2:
        size = ((length[0] - 192) << 8) + length[1] + 192
    else:
        size = int.from_bytes(length[-4:] if width == 5 else length, "big")
    return tag, 1 + width, size


def _packets(data: bytes, where: Path) -> list[tuple[int, bytes]]:
    packets, pos = [], 0
    while pos < len(data):
        tag, header, size = _header(data, pos, where)
        start = pos + header
        if start + size > len(data):
            left = len(data) - start
            raise _damaged(
                where, f"the packet at byte {pos} (tag {tag}) announces {size} bytes, {left} are left"
            )
        packets.append((tag, data[start : start + size]))
        pos = start + size
    return packets


def _public_length(body: bytes, where: Path) -> int:
    """Length of the public part at the start of a v4 key packet body."""
    if len(body) < 6:
        raise _damaged(where, f"a key packet of {len(body)} bytes, shorter than its fixed fields")
    if body[0] != 4:
        raise UserError(
            f"--keyring {where}: a version {body[0]} key; only version 4 keys (what gpg makes) are read"
        )
    algorithm = body[5]
    if algorithm not in _PUBLIC_FIELDS:
        raise UserError(f"--keyring {where}: public-key algorithm {algorithm} is not one Helm can sign with")
    pos = 6
    for part in _PUBLIC_FIELDS[algorithm]:
        if isinstance(part, int):
            pos += part
        elif part == "m":
            pos += 2 + (int.from_bytes(body[pos : pos + 2], "big") + 7) // 8
        else:  # "o" and "k": a length octet, then that many octets
            pos += 1 + (body[pos] if pos < len(body) else 0)
        if pos > len(body):
            raise _damaged(where, f"a key packet of {len(body)} bytes ends inside its public key")
    return pos


def _signed(packets: list[tuple[int, bytes]], index: int) -> bool:
    """Whether a signature follows the user ID at `index`: Helm keeps a user ID only with its
    self-signature after it (ProtonMail go-crypto openpgp/keys.go, addUserID) and passes over trust
    packets (packet/packet.go: not implemented, consumed). kvtier checks that one follows; Helm checks it."""
    after = [tag for tag, _ in packets[index + 1 :] if tag != TRUST]
    return bool(after) and after[0] == SIGNATURE


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
    packets = _packets(data, path)
    for index, (tag, body) in enumerate(packets):
        if tag in (SECRET_KEY, PUBLIC_KEY):
            public = body[: _public_length(body, path)]
            digest = hashlib.sha1(b"\x99" + len(public).to_bytes(2, "big") + public).hexdigest()
            usage = body[len(public) : len(public) + 1]  # S2K usage: 0 when stored in the clear
            if tag == SECRET_KEY and not usage:
                raise _damaged(path, "a secret key packet ends before its secret part")
            secret = tag == SECRET_KEY
            keys.append(Key(digest.upper(), secret=secret, protected=secret and usage != b"\0"))
        elif tag == USER_ID and keys:
            (keys[-1].user_ids if _signed(packets, index) else keys[-1].unsigned_ids).append(
                body.decode("utf-8", "replace")
            )
    if not keys:
        raise UserError(
            f"--keyring {path} holds no keys; expected the binary output of "
            "gpg --export-secret-keys KEY > FILE"
        )
    return keys


def find(keys: list[Key], name: str, where: Path) -> Key:
    """The key `helm package --key NAME` signs with: a user ID equal to NAME, else the only key with
    a user ID containing NAME (Helm 3.22 and 4.3 pkg/provenance/sign.go, NewFromKeyring)."""
    for key in keys:
        if name in key.user_ids:
            return key
    # Helm counts user IDs, not keys: two IDs of one key that both contain NAME are ambiguous too.
    matches = [k for k in keys for uid in k.user_ids if name in uid]
    unsigned = [uid for k in keys for uid in k.unsigned_ids if name in uid]
    if not matches and unsigned:
        raise _damaged(where, f"the user ID {unsigned[0]!r} has no signature after it, so Helm ignores it")
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
