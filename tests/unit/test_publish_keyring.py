"""A cut or damaged --keyring is a one-line exit 2 of `kvtier package --sign`, never a traceback.

Every prefix of a real keyring (gpg's, tests/harness/gpg_keys.py) goes through the CLI entry: each names
the file, says what was expected and how to get it, and nothing is packaged. gpg frames packets with
old-format headers; the same keys are also tried with new-format headers (RFC 4880 section 4.2.2), as Go's
openpgp (Helm's own library) and Sequoia write them: a cut inside such a header once raised IndexError.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import gpg_keys
from kvtier import cli
from kvtier.errors import UserError
from kvtier.publish import keyring

KEY_URL = "https://example.invalid/kvtier-signing-key.asc"


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory, need) -> Iterator[gpg_keys.Keys]:
    need(gpg_keys.available(), "gpg and gpgconf not on PATH (apt-get install gnupg)")
    with gpg_keys.make(tmp_path_factory.mktemp("keys")) as made:
        yield made


def new_format(data: bytes) -> bytes:
    """gpg's old-format packets re-framed with new-format headers: the same packets, other length octets."""
    out, pos = bytearray(), 0
    while pos < len(data):
        head = data[pos]
        assert head & 0xC0 == 0x80, f"gpg wrote an old-format header at byte {pos}"
        width = {0: 1, 1: 2, 2: 4}[head & 0x03]
        size = int.from_bytes(data[pos + 1 : pos + 1 + width], "big")
        out.append(0xC0 | (head >> 2) & 0x0F)
        if size < 192:
            out.append(size)
        elif size < 8384:
            out += bytes([((size - 192) >> 8) + 192, (size - 192) & 0xFF])
        else:
            out += b"\xff" + size.to_bytes(4, "big")
        out += data[pos + 1 + width : pos + 1 + width + size]
        pos += 1 + width + size
    return bytes(out)


def _framings(keys: gpg_keys.Keys, name: str, home: Path) -> dict[str, bytes]:
    key = getattr(keys, name)
    old = key.secring.read_bytes()
    new = new_format(old)
    listed = subprocess.run(
        ["gpg", "--batch", "--list-packets"],
        input=new,
        capture_output=True,
        env={**os.environ, "GNUPGHOME": str(home)},
        timeout=60,
        check=False,
    )
    assert listed.returncode == 0 and b"new-ctb" in listed.stdout, listed.stderr
    return {"gpg": old, "new-format": new}


@pytest.mark.parametrize("name", ["plain", "protected"])
def test_every_cut_of_a_keyring_is_a_one_line_exit_2(
    keys: gpg_keys.Keys,
    name: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HELM_KEY_PASSPHRASE", raising=False)
    monkeypatch.delenv("KVTIER_HELM", raising=False)
    key = getattr(keys, name)
    cut, out = tmp_path / "cut.gpg", tmp_path / "out"
    flags = ["package", "--dry-run", "--chart", "curvine", "--destination", str(out), "--sign"]
    flags += ["--key", key.email, "--keyring", str(cut), "--sign-key-url", KEY_URL]
    wrong: list[str] = []
    for framing, whole in _framings(keys, name, keys.home).items():
        # The whole file is read as gpg made it (the same key under either framing).
        cut.write_bytes(whole)
        assert keyring.find(keyring.read(cut), key.email, cut).fingerprint == key.fingerprint
        for length in range(len(whole)):
            cut.write_bytes(whole[:length])
            try:
                code = cli.main(flags)
            except Exception as error:  # the failure this test exists to find
                wrong.append(f"{framing}[:{length}]: {type(error).__name__}: {error}")
                continue
            err = capsys.readouterr().err
            lines = err.strip().splitlines()
            if code != 2 or len(lines) != 1 or f"--keyring {cut}" not in err or "Traceback" in err:
                wrong.append(f"{framing}[:{length}]: exit {code}: {err.strip()}")
    assert wrong == [], f"{len(wrong)} cuts:\n" + "\n".join(wrong[:10])
    assert not out.exists(), "nothing is packaged from a cut keyring"


def test_a_cut_message_names_the_file_what_was_expected_and_the_fix(
    keys: gpg_keys.Keys, tmp_path: Path
) -> None:
    whole = keys.plain.secring.read_bytes()
    cut = tmp_path / "cut.gpg"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(UserError) as refused:
        keyring.read(cut)
    message = str(refused.value)
    assert f"--keyring {cut}" in message and "gpg --export-secret-keys" in message, message
    assert "OpenPGP keyring" in message and "\n" not in message, message


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_damaged_keyring_is_read_or_refused_never_a_crash(
    keys: gpg_keys.Keys, tmp_path: Path, data: st.DataObject
) -> None:
    """Bytes changed anywhere in either key (lengths, MPI sizes, the S2K octet): a key list or a UserError."""
    whole = bytearray(data.draw(st.sampled_from([keys.plain, keys.protected])).secring.read_bytes())
    whole = bytearray(data.draw(st.sampled_from([bytes(whole), new_format(bytes(whole))])))
    for _ in range(data.draw(st.integers(1, 3))):
        whole[data.draw(st.integers(0, len(whole) - 1))] = data.draw(st.integers(0, 255))
    damaged = tmp_path / "damaged.gpg"
    damaged.write_bytes(bytes(whole))
    try:
        keyring.read(damaged)
    except UserError as error:
        assert "\n" not in str(error) and str(damaged) in str(error), error
