"""kvtier.publish.signing.Signer carries the key's passphrase to Helm's stdin and nowhere else: formatting a
Signer (repr, str, f-string, an assertion or log that prints it) never shows it."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from pathlib import Path

import kvtier.publish
from kvtier.publish.signing import Signer

PASSPHRASE = "correct horse battery staple 7"


def test_formatting_a_signer_never_shows_its_passphrase() -> None:
    signer = Signer(
        "ci@example.invalid", Path("/keys/ring.gpg"), "ABCD1234", "https://e.invalid/k", PASSPHRASE
    )
    for text in (repr(signer), str(signer), f"{signer}", f"{signer!r}", repr([signer]), repr({"s": signer})):
        assert PASSPHRASE not in text, text
        assert "ci@example.invalid" in text, "the rest of the signer still shows"
    assert signer.passphrase == PASSPHRASE, "Helm still gets it"


def test_no_field_of_a_publishing_dataclass_that_holds_a_secret_is_in_its_repr() -> None:
    """Every field named like a secret in kvtier.publish's dataclasses is left out of repr."""
    secret_like = ("passphrase", "password", "token", "secret_key", "credential")
    shown = []
    for info in pkgutil.iter_modules(kvtier.publish.__path__):
        module = importlib.import_module(f"kvtier.publish.{info.name}")
        for name, value in vars(module).items():
            if dataclasses.is_dataclass(value) and value.__module__ == module.__name__:
                shown += [
                    f"{module.__name__}.{name}.{f.name}"
                    for f in dataclasses.fields(value)
                    if f.repr and any(word in f.name.lower() for word in secret_like)
                ]
    assert shown == [], f"secret fields shown by repr: {shown}"
