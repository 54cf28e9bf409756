"""Signing for `kvtier package --sign`: Helm's provenance files, and the Artifact Hub key annotation.

Helm signs (`helm package --sign --key NAME --keyring FILE --passphrase-file -` writes
`<chart>-<version>.tgz.prov`); kvtier checks the request first, so a missing keyring, a key that is not
in it or a protected key without a passphrase is refused before any chart is built, and turns Helm's
own signing errors into a message that names the flag to fix.

The passphrase goes to Helm on a pipe, never on the command line or on disk. It comes from
--passphrase-file (a file, or `-` for stdin: Helm's flag) or from $HELM_KEY_PASSPHRASE: Helm 2 read
that variable, Helm 3 and 4 no longer do (only --passphrase-file), so kvtier reads it and pipes it on.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from kvtier.errors import UserError
from kvtier.publish import keyring

PASSPHRASE_ENV = "HELM_KEY_PASSPHRASE"
SIGN_KEY_ANNOTATION = "artifacthub.io/signKey"


@dataclass(frozen=True)
class Signer:
    key: str  # --key: what Helm matches against the keyring's user IDs
    keyring: Path
    fingerprint: str
    key_url: str
    # None: the key is not protected. Out of repr (and str, which is repr here), so no log, assertion or
    # error message that formats a Signer shows it.
    passphrase: str | None = field(repr=False)

    def helm_flags(self) -> list[str]:
        flags = ["--sign", "--key", self.key, "--keyring", str(self.keyring)]
        return [*flags, "--passphrase-file", "-"] if self.passphrase is not None else flags

    def annotation(self) -> str:
        """The `artifacthub.io/signKey` value; Artifact Hub rejects the annotation without a url."""
        return yaml.safe_dump({"fingerprint": self.fingerprint, "url": self.key_url}, sort_keys=False)

    def explain(self, chart: str, helm_error: str) -> UserError:
        """Helm's signing failure as a message that says which flag to fix."""
        if self.passphrase is not None and re.search(
            r"incorrect key|checksum failure|decryption|passphrase", helm_error, re.IGNORECASE
        ):
            return UserError(
                f"signing {chart}: the passphrase does not unlock --key {self.key!r} ({self.fingerprint}) "
                f"in --keyring {self.keyring}; check --passphrase-file or ${PASSPHRASE_ENV} "
                f"(Helm said: {helm_error})"
            )
        return UserError(
            f"signing {chart} with --key {self.key!r} from --keyring {self.keyring} failed: {helm_error}"
        )


def _passphrase(passphrase_file: str | None) -> str | None:
    """The passphrase text as Helm would read it (Helm uses its first line)."""
    if passphrase_file == "-":
        return sys.stdin.read()
    if passphrase_file:
        try:
            return Path(passphrase_file).read_text()
        except OSError as error:
            raise UserError(
                f"--passphrase-file {passphrase_file}: cannot read it ({error.strerror}); "
                "give a file holding the passphrase on its first line, or - for stdin"
            ) from None
    if PASSPHRASE_ENV in os.environ:
        return os.environ[PASSPHRASE_ENV] + "\n"
    return None


def signer(
    key: str | None, keyring_path: Path | None, passphrase_file: str | None, key_url: str | None
) -> Signer:
    """Check a --sign request against the keyring; every refusal names the flag and the fix."""
    if not key:
        raise UserError("--sign needs --key NAME: a name or e-mail in the signing key's user ID")
    if keyring_path is None:
        raise UserError(
            "--sign needs --keyring FILE: the secret keyring Helm signs from "
            "(gpg --export-secret-keys NAME > FILE)"
        )
    if not keyring_path.is_file():
        raise UserError(
            f"--keyring {keyring_path}: no such file; export the signing key with "
            f"gpg --export-secret-keys {key} > {keyring_path}"
        )
    if not key_url or not key_url.startswith("https://"):
        raise UserError(
            f"--sign needs --sign-key-url https://...: where users download the public key; it goes into "
            f"the packaged Chart.yaml's {SIGN_KEY_ANNOTATION} annotation, which Artifact Hub refuses "
            f"without a url (got {key_url!r})"
        )
    found = keyring.find(keyring.read(keyring_path), key, keyring_path)
    if not found.secret:
        raise UserError(
            f"--key {key!r} ({found.fingerprint}) is only a public key in --keyring {keyring_path}; "
            f"Helm signs with the private key: export it with gpg --export-secret-keys {key} > FILE"
        )
    given = _passphrase(passphrase_file)
    if found.protected and given is None:
        raise UserError(
            f"--key {key!r} ({found.fingerprint}) is protected by a passphrase; pass --passphrase-file FILE "
            f"(or - to read it from stdin) or set ${PASSPHRASE_ENV}"
        )
    return Signer(key, keyring_path.resolve(), found.fingerprint, key_url, given if found.protected else None)


def annotate(chart_yaml: Path, signing: Signer) -> None:
    """Add the signKey annotation to a chart's Chart.yaml (the packaging copy, never the checkout)."""
    meta = yaml.safe_load(chart_yaml.read_text()) or {}
    annotations = meta.get("annotations") or {}
    annotations[SIGN_KEY_ANNOTATION] = signing.annotation()
    meta["annotations"] = annotations
    chart_yaml.write_text(yaml.safe_dump(meta, sort_keys=False, allow_unicode=True))
