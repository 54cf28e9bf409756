"""Throwaway OpenPGP signing keys made by the real gpg in a GNUPGHOME of the test's own (never ~/.gnupg).

Helm reads the legacy binary keyring format, not gpg 2.1+'s keybox, so each key is exported to a file:
the secret key (`gpg --export-secret-keys`, what `helm package --sign --keyring` takes) and the public
keyring of all keys (`gpg --export`, what `helm verify --keyring` takes).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Key:
    email: str  # what --key is given (a part of the user ID)
    fingerprint: str  # as gpg lists it
    secring: Path  # the exported secret key
    passphrase: str  # "" when unprotected


@dataclass(frozen=True)
class Keys:
    plain: Key
    protected: Key
    pubring: Path  # both public keys
    home: Path


def available() -> bool:
    return shutil.which("gpg") is not None and shutil.which("gpgconf") is not None


def _gpg(home: Path, *args: str, passphrase: str = "") -> bytes:
    result = subprocess.run(
        ["gpg", "--batch", "--pinentry-mode", "loopback", "--passphrase", passphrase, *args],
        capture_output=True,
        env={**os.environ, "GNUPGHOME": str(home)},
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    return result.stdout


def _make(home: Path, folder: Path, name: str, algorithm: str, passphrase: str) -> Key:
    email = f"{name}@kvtier-test.invalid"
    _gpg(
        home,
        "--quick-gen-key",
        f"kvtier test {name} <{email}>",
        algorithm,
        "sign",
        "never",
        passphrase=passphrase,
    )
    listing = _gpg(home, "--with-colons", "--list-secret-keys", email).decode()
    fingerprint = next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))
    secring = folder / f"{name}-secring.gpg"
    secring.write_bytes(_gpg(home, "--export-secret-keys", email, passphrase=passphrase))
    return Key(email, fingerprint, secring, passphrase)


@contextmanager
def make(folder: Path) -> Iterator[Keys]:
    """An unprotected RSA key and a passphrase-protected Ed25519 key; gpg's agent is stopped at the end."""
    home = folder / "gnupg"
    home.mkdir(mode=0o700, parents=True)
    try:
        plain = _make(home, folder, "plain", "rsa3072", "")
        protected = _make(home, folder, "protected", "ed25519", "correct horse battery")
        pubring = folder / "pubring.gpg"
        pubring.write_bytes(_gpg(home, "--export"))
        yield Keys(plain, protected, pubring, home)
    finally:
        subprocess.run(
            ["gpgconf", "--kill", "gpg-agent"],
            env={**os.environ, "GNUPGHOME": str(home)},
            capture_output=True,
            timeout=30,
            check=False,
        )
