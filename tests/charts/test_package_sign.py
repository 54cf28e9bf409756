"""`kvtier package --sign`: the provenance Helm writes, judged by the real Helm (both majors) and gpg.

Keys are made by gpg in a GNUPGHOME of the test's own (tests/harness/gpg_keys.py). A signed package must
pass `helm verify`, `helm install --dry-run=client --verify` and `helm template --verify` with the public
keyring, and be refused by them once a byte of a template changes or the .prov of another package sits
beside it. The packaged Chart.yaml carries `artifacthub.io/signKey` with the fingerprint gpg lists for
the key used. Bad signing input (keyring, key, passphrase, key URL) is a clear exit 2 before any package.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from harness import gpg_keys
from kvtier import paths

CHART = "curvine"  # no dependencies: the fastest real chart to package
KEY_URL = "https://example.invalid/kvtier-signing-key.asc"


def _version() -> str:
    return str(yaml.safe_load((paths.CHARTS / CHART / "Chart.yaml").read_text())["version"])


def kvtier(
    *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("KVTIER_HELM", "HELM_KEY_PASSPHRASE")}
    return subprocess.run(
        [sys.executable, "-m", "kvtier.cli", "package", "--dry-run", "--chart", CHART, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=600,
        env={**base, **(env or {})},
        cwd=paths.ROOT,
    )


def helm(major: int, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(paths.TOOLS_BIN / f"helm{major}"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory, need) -> Iterator[gpg_keys.Keys]:
    need(gpg_keys.available(), "gpg and gpgconf not on PATH (apt-get install gnupg)")
    with gpg_keys.make(tmp_path_factory.mktemp("keys")) as made:
        yield made


def _sign_flags(key: gpg_keys.Key) -> list[str]:
    return ["--sign", "--key", key.email, "--keyring", str(key.secring), "--sign-key-url", KEY_URL]


@pytest.fixture(scope="module", params=[3, 4], ids=["signed-by-helm3", "signed-by-helm4"])
def signed(request, keys: gpg_keys.Keys, tmp_path_factory: pytest.TempPathFactory, need) -> Path:
    """curvine packaged and signed by `kvtier package --helm N` with the unprotected key."""
    major = request.param
    need((paths.TOOLS_BIN / f"helm{major}").exists(), f"pinned Helm {major} not built (make tools)")
    dest = tmp_path_factory.mktemp(f"signed{major}")
    result = kvtier("--helm", str(major), "--destination", str(dest), *_sign_flags(keys.plain))
    assert result.returncode == 0, result.stdout + result.stderr
    package = dest / f"{CHART}-{_version()}.tgz"
    assert package.is_file() and Path(f"{package}.prov").is_file(), sorted(p.name for p in dest.iterdir())
    return package


def _copy_with_prov(package: Path, prov: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(package, folder / package.name)
    shutil.copy(prov, folder / f"{package.name}.prov")
    return folder / package.name


def _altered(package: Path, folder: Path) -> Path:
    """The package with one byte of a template's comment changed, re-tarred, beside the original .prov."""
    folder.mkdir(parents=True, exist_ok=True)
    out = io.BytesIO()
    changed = ""
    with tarfile.open(package) as source, tarfile.open(fileobj=out, mode="w:gz") as target:
        for member in source.getmembers():
            data = source.extractfile(member).read() if member.isfile() else b""  # type: ignore[union-attr]
            comment = data.find(b"\n#") if "/templates/" in member.name and not changed else -1
            if comment >= 0:
                position = comment + 2
                data = (
                    data[:position]
                    + (b"X" if data[position : position + 1] != b"X" else b"Y")
                    + data[position + 1 :]
                )
                changed = member.name
            member.size = len(data)
            target.addfile(member, io.BytesIO(data) if member.isfile() else None)
    assert changed, "the chart has a template with a comment line to alter"
    (folder / package.name).write_bytes(out.getvalue())
    shutil.copy(f"{package}.prov", folder / f"{package.name}.prov")
    return folder / package.name


@pytest.mark.parametrize("verifier", [3, 4])
def test_helm_verify_accepts_the_signed_package(signed: Path, keys: gpg_keys.Keys, verifier: int) -> None:
    result = helm(verifier, "verify", str(signed), "--keyring", str(keys.pubring))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Using Key With Fingerprint: {keys.plain.fingerprint}" in result.stdout, result.stdout


@pytest.mark.parametrize("verifier", [3, 4])
def test_helm_verify_refuses_an_altered_package(
    signed: Path, keys: gpg_keys.Keys, verifier: int, tmp_path: Path
) -> None:
    altered = _altered(signed, tmp_path / "altered")
    result = helm(verifier, "verify", str(altered), "--keyring", str(keys.pubring))
    assert result.returncode != 0, result.stdout
    assert "sha256 sum does not match" in result.stderr, result.stderr
    rendered = helm(verifier, "template", "probe", str(altered))
    assert rendered.returncode == 0, "the altered chart still renders: only the signature refuses it"


@pytest.mark.parametrize("verifier", [3, 4])
def test_helm_verify_refuses_the_provenance_of_another_package(
    signed: Path, keys: gpg_keys.Keys, verifier: int, tmp_path: Path
) -> None:
    """A .prov that Helm itself signed with the same key, but for another chart, does not vouch for ours."""
    assert helm(verifier, "create", "other", cwd=tmp_path).returncode == 0
    made = helm(
        verifier,
        "package",
        str(tmp_path / "other"),
        "--sign",
        "--key",
        keys.plain.email,
        "--keyring",
        str(keys.plain.secring),
        "--destination",
        str(tmp_path),
    )
    assert made.returncode == 0, made.stderr
    other_prov = tmp_path / "other-0.1.0.tgz.prov"
    assert (
        helm(verifier, "verify", str(tmp_path / "other-0.1.0.tgz"), "--keyring", str(keys.pubring)).returncode
        == 0
    )
    swapped = _copy_with_prov(signed, other_prov, tmp_path / "swapped")
    result = helm(verifier, "verify", str(swapped), "--keyring", str(keys.pubring))
    assert result.returncode != 0, result.stdout


@pytest.mark.parametrize("verifier", [3, 4])
def test_install_and_template_verify_accept_signed_and_refuse_altered(
    signed: Path, keys: gpg_keys.Keys, verifier: int, tmp_path: Path
) -> None:
    altered = _altered(signed, tmp_path / "altered")
    # Client-side dry run: Helm renders and stops. The kubeconfig points at a closed loopback port. Helm 4
    # contacts no cluster; Helm 3.22 still asks the API server's version (pkg/action/install.go: only
    # `template` is ClientOnly), which it does after --verify passed: that refusal shows acceptance.
    kubeconfig = tmp_path / "no-cluster.yaml"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "none", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "none", "user": {}}],
                "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}],
                "current-context": "none",
            }
        )
    )
    kube = ["--kubeconfig", str(kubeconfig)]
    for command in (["install", "probe", "--dry-run=client", *kube], ["template", "probe"]):
        verify = ["--verify", "--keyring", str(keys.pubring)]
        accepted = helm(verifier, *command, str(signed), *verify)
        if verifier == 3 and command[0] == "install":
            assert "Kubernetes cluster unreachable" in accepted.stderr, accepted.stderr
        else:
            assert accepted.returncode == 0, f"{command}: {accepted.stderr}"
            assert "kind: StatefulSet" in accepted.stdout
        refused = helm(verifier, *command, str(altered), *verify)
        assert refused.returncode != 0, f"{command} accepted an altered package"
        assert "sha256 sum does not match" in refused.stderr, refused.stderr


def test_signkey_annotation_names_the_key_that_signed(signed: Path, keys: gpg_keys.Keys) -> None:
    with tarfile.open(signed) as archive:
        meta = yaml.safe_load(archive.extractfile(f"{CHART}/Chart.yaml").read())  # type: ignore[union-attr]
    sign_key = yaml.safe_load(meta["annotations"]["artifacthub.io/signKey"])
    assert sign_key == {"fingerprint": keys.plain.fingerprint, "url": KEY_URL}
    checkout = yaml.safe_load((paths.CHARTS / CHART / "Chart.yaml").read_text())
    assert "artifacthub.io/signKey" not in (checkout.get("annotations") or {}), "the checkout is not edited"


@pytest.mark.parametrize("source", ["file", "stdin", "env"])
def test_protected_key_signs_with_its_passphrase(
    keys: gpg_keys.Keys, tmp_path: Path, source: str, need
) -> None:
    need((paths.TOOLS_BIN / "helm3").exists(), "pinned Helm 3 not built (make tools)")
    key = keys.protected
    flags = ["--sign", "--key", key.email, "--keyring", str(key.secring), "--sign-key-url", KEY_URL]
    stdin, env = "", {}
    if source == "file":
        (tmp_path / "passphrase").write_text(key.passphrase + "\n")
        flags += ["--passphrase-file", str(tmp_path / "passphrase")]
    elif source == "stdin":
        flags += ["--passphrase-file", "-"]
        stdin = key.passphrase + "\n"
    else:
        env = {"HELM_KEY_PASSPHRASE": key.passphrase}
    result = kvtier("--destination", str(tmp_path / "out"), *flags, stdin=stdin, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    package = tmp_path / "out" / f"{CHART}-{_version()}.tgz"
    verified = helm(3, "verify", str(package), "--keyring", str(keys.pubring))
    assert verified.returncode == 0, verified.stderr
    assert f"Using Key With Fingerprint: {key.fingerprint}" in verified.stdout


@pytest.mark.parametrize("major", [3, 4])
def test_wrong_passphrase_is_a_clear_error(keys: gpg_keys.Keys, tmp_path: Path, major: int, need) -> None:
    """Helm finds a wrong passphrase ("private key checksum failure"); kvtier names the flag to fix."""
    need((paths.TOOLS_BIN / f"helm{major}").exists(), f"pinned Helm {major} not built (make tools)")
    key = keys.protected
    (tmp_path / "passphrase").write_text("not the passphrase\n")
    flags = ["--sign", "--key", key.email, "--keyring", str(key.secring), "--sign-key-url", KEY_URL]
    flags += ["--passphrase-file", str(tmp_path / "passphrase")]
    result = kvtier("--helm", str(major), "--destination", str(tmp_path / "out"), *flags)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "the passphrase does not unlock --key" in result.stderr and "--passphrase-file" in result.stderr
    assert "Traceback" not in result.stderr
    assert not list((tmp_path / "out").glob("*.tgz*")), "nothing is left behind by a refused signing"


def test_protected_key_without_a_passphrase_is_refused_before_packaging(
    keys: gpg_keys.Keys, tmp_path: Path
) -> None:
    key = keys.protected
    flags = ["--sign", "--key", key.email, "--keyring", str(key.secring), "--sign-key-url", KEY_URL]
    result = kvtier("--destination", str(tmp_path / "out"), *flags)
    assert result.returncode == 2
    assert "protected by a passphrase" in result.stderr and "HELM_KEY_PASSPHRASE" in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"--keyring": "missing.gpg"}, "--keyring"),
        ({"--key": "nobody@kvtier-test.invalid"}, "no key in --keyring"),
        ({"--key": "kvtier-test.invalid", "--keyring": "pubring"}, "matches 2 user IDs"),
        ({"--key": "plain@kvtier-test.invalid", "--keyring": "pubring"}, "only a public key"),
        ({"--sign-key-url": "http://example.invalid/key.asc"}, "--sign-key-url https://"),
    ],
    ids=["missing-keyring", "unknown-key", "ambiguous-key", "public-only-keyring", "plain-http-key-url"],
)
def test_bad_signing_input_is_refused_before_packaging(
    keys: gpg_keys.Keys, tmp_path: Path, change: dict[str, str], needle: str
) -> None:
    options = {
        "--key": keys.plain.email,
        "--keyring": str(keys.plain.secring),
        "--sign-key-url": KEY_URL,
        **change,
    }
    if options["--keyring"] == "pubring":
        options["--keyring"] = str(keys.pubring)
    elif options["--keyring"] == "missing.gpg":
        options["--keyring"] = str(tmp_path / "missing.gpg")
    flags = ["--sign", *(part for pair in options.items() for part in pair)]
    result = kvtier("--destination", str(tmp_path / "out"), *flags)
    assert result.returncode == 2, result.stdout + result.stderr
    assert needle in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_unsigned_package_removes_an_old_provenance(tmp_path: Path, need) -> None:
    """`helm push` uploads <package>.prov when it exists: an unsigned run must not leave a stale one."""
    need((paths.TOOLS_BIN / "helm3").exists(), "pinned Helm 3 not built (make tools)")
    stale = tmp_path / f"{CHART}-{_version()}.tgz.prov"
    stale.write_text("a provenance file of an earlier signed run\n")
    result = kvtier("--destination", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / f"{CHART}-{_version()}.tgz").is_file() and not stale.exists()
