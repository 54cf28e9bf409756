"""`kvtier package` against a real OCI registry (CNCF distribution) on loopback, with basic auth.

Publishes both charts, pulls them back with the pinned Helm 3 and Helm 4, and checks the refusals:
an existing version is never overwritten, bad credentials and remote plain HTTP are clear errors.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml

from harness import gpg_keys, registry_server
from kvtier import paths
from kvtier.publish.registry import Registry

USER, PASSWORD = "publisher", "s3cret-for-loopback-only"
CHARTS = ("curvine", "kv-tiered-inference")


def _tools_ready() -> tuple[bool, str]:
    missing = [t for t in ("registry", "helm3", "helm4") if not (paths.TOOLS_BIN / t).exists()]
    charts = [c for c in CHARTS if not (paths.CHARTS / c / "Chart.yaml").exists()]
    return not missing and not charts, f"missing tools {missing} (make tools) or charts {charts}"


@pytest.fixture(scope="module")
def oci(tmp_path_factory: pytest.TempPathFactory, need) -> Iterator[registry_server.LocalRegistry]:
    ready, why = _tools_ready()
    need(ready, why)
    import bcrypt

    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=5)).decode()
    with registry_server.serve(tmp_path_factory.mktemp("registry"), htpasswd=f"{USER}:{hashed}") as server:
        yield server


def kvtier(
    *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kvtier.cli", "package", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=600,
        env={**{k: v for k, v in os.environ.items() if k != "KVTIER_HELM"}, **(env or {})},
        cwd=paths.ROOT,
    )


def manifest_digest(server: registry_server.LocalRegistry, repo: str, tag: str) -> str | None:
    """Docker-Content-Digest of a manifest via the OCI distribution API (loopback), None when absent."""
    response = requests.head(
        f"{server.url}/v2/{repo}/manifests/{tag}",
        auth=(USER, PASSWORD),
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
        timeout=10,
    )
    if response.status_code == 404:
        return None
    response.raise_for_status()
    return response.headers["Docker-Content-Digest"]


def versions() -> dict[str, str]:
    return {c: str(yaml.safe_load((paths.CHARTS / c / "Chart.yaml").read_text())["version"]) for c in CHARTS}


@pytest.fixture(scope="module")
def published(oci: registry_server.LocalRegistry, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The first publish of both charts, credentials from the environment."""
    dest = tmp_path_factory.mktemp("dist")
    result = kvtier(
        "--registry",
        f"oci://{oci.host}/charts",
        "--plain-http",
        "--destination",
        str(dest),
        env={
            "KVTIER_REGISTRY_USERNAME": USER,
            "KVTIER_REGISTRY_PASSWORD": PASSWORD,
            "HELM_REGISTRY_CONFIG": str(dest / "helm-default-registry.json"),
        },
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return {"dest": dest, "stdout": result.stdout}


def test_credentials_from_the_environment_leave_no_secret_on_disk(published) -> None:
    assert not (published["dest"] / "helm-default-registry.json").exists(), (
        "the login went to a throwaway registry config, not Helm's default one"
    )


def test_publish_pushes_both_charts_at_their_chart_versions(oci, published) -> None:
    lines = {line.split()[0]: line.split() for line in published["stdout"].splitlines()}
    for chart, version in versions().items():
        assert lines[chart][1:3] == [version, "pushed"], published["stdout"]
        digest = manifest_digest(oci, f"charts/{chart}", version)
        assert digest and digest in published["stdout"], "the digest kvtier printed is the registry's"


@pytest.mark.parametrize("major", [3, 4])
def test_pulled_charts_are_the_pushed_packages(oci, published, tmp_path: Path, major: int) -> None:
    config = tmp_path / "registry.json"
    reg = Registry(f"oci://{oci.host}/charts", True, config, helm_major=major, allow_override=False)
    reg.login(USER, PASSWORD)
    for chart, version in versions().items():
        pulled = reg.pull(chart, version, tmp_path / "pulled")
        pushed = published["dest"] / f"{chart}-{version}.tgz"
        assert hashlib.sha256(pulled.read_bytes()).digest() == hashlib.sha256(pushed.read_bytes()).digest()
        with tarfile.open(pulled) as archive:
            meta = yaml.safe_load(archive.extractfile(f"{chart}/Chart.yaml").read())  # type: ignore[union-attr]
            names = archive.getnames()
        assert (meta["name"], str(meta["version"])) == (chart, version)
        assert f"{chart}/values.schema.json" in names
    umbrella = tmp_path / "pulled" / f"kv-tiered-inference-{versions()['kv-tiered-inference']}.tgz"
    with tarfile.open(umbrella) as archive:
        bundled = [n for n in archive.getnames() if n.startswith("kv-tiered-inference/charts/curvine")]
    assert bundled, "the umbrella package carries the curvine chart it depends on"


def test_existing_version_is_never_overwritten(oci, published, tmp_path: Path) -> None:
    before = {c: manifest_digest(oci, f"charts/{c}", v) for c, v in versions().items()}
    result = kvtier(
        "--registry",
        f"oci://{oci.host}/charts",
        "--plain-http",
        "--username",
        USER,
        "--password-stdin",
        "--destination",
        str(tmp_path),
        stdin=PASSWORD + "\n",
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "already in the registry and is never overwritten" in result.stderr
    assert "nothing was pushed" in result.stderr
    assert {c: manifest_digest(oci, f"charts/{c}", v) for c, v in versions().items()} == before


def test_dry_run_pushes_nothing(oci, published, tmp_path: Path) -> None:
    result = kvtier(
        "--registry",
        f"oci://{oci.host}/fresh",
        "--plain-http",
        "--dry-run",
        "--destination",
        str(tmp_path),
        env={"KVTIER_REGISTRY_USERNAME": USER, "KVTIER_REGISTRY_PASSWORD": PASSWORD},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("would push") == len(CHARTS)
    assert all(manifest_digest(oci, f"fresh/{c}", v) is None for c, v in versions().items())
    assert sorted(p.name for p in tmp_path.glob("*.tgz")) == sorted(
        f"{c}-{v}.tgz" for c, v in versions().items()
    )


def test_dry_run_reports_existing_versions(oci, published, tmp_path: Path) -> None:
    env = {"KVTIER_REGISTRY_USERNAME": USER, "KVTIER_REGISTRY_PASSWORD": PASSWORD}
    args = ["--registry", f"oci://{oci.host}/charts", "--plain-http", "--dry-run", "--chart", "curvine"]
    result = kvtier(*args, "--destination", str(tmp_path), env=env)
    assert result.returncode == 1
    assert (
        f"oci://{oci.host}/charts/curvine:{versions()['curvine']} is already in the registry" in result.stderr
    )


def test_exists_distinguishes_missing_tag_and_missing_repository(oci, published, tmp_path: Path) -> None:
    reg = Registry(f"oci://{oci.host}/charts", True, tmp_path / "c.json", allow_override=False)
    reg.login(USER, PASSWORD)
    assert reg.exists("curvine", versions()["curvine"])
    assert not reg.exists("curvine", "999.0.0")
    assert not reg.exists("no-such-chart", "0.1.0")


def test_wrong_password_is_a_clear_error(oci, tmp_path: Path) -> None:
    result = kvtier(
        "--registry",
        f"oci://{oci.host}/charts",
        "--plain-http",
        "--destination",
        str(tmp_path),
        env={"KVTIER_REGISTRY_USERNAME": USER, "KVTIER_REGISTRY_PASSWORD": "wrong"},
    )
    assert result.returncode == 2
    assert f"login to {oci.host} as {USER} failed" in result.stderr
    assert "Traceback" not in result.stderr


def test_no_credentials_cannot_check_and_pushes_nothing(oci, tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    result = kvtier(
        "--registry",
        f"oci://{oci.host}/anon",
        "--plain-http",
        "--registry-config",
        str(empty),
        "--destination",
        str(tmp_path),
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "cannot check" in result.stderr and "nothing was pushed" in result.stderr
    assert all(manifest_digest(oci, f"anon/{c}", v) is None for c, v in versions().items())


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("oci://registry.example.com/charts", "only allowed for a loopback registry"),
        ("https://127.0.0.1:5000/charts", "is not an OCI URL"),
    ],
)
def test_bad_registry_arguments_are_refused_before_any_traffic(url: str, needle: str) -> None:
    result = kvtier("--registry", url, "--plain-http", "--dry-run")
    assert result.returncode == 2
    assert needle in result.stderr and "Traceback" not in result.stderr


def test_signed_push_carries_its_provenance(oci, published, tmp_path: Path, need) -> None:
    """`helm push` uploads the .prov beside the .tgz (Helm's pkg/pusher/ocipusher.go), so `helm pull
    --verify` from the registry checks the signature; the unsigned publish has nothing to verify."""
    need(gpg_keys.available(), "gpg and gpgconf not on PATH (apt-get install gnupg)")
    version, dist = versions()["curvine"], tmp_path / "dist"
    env = {"KVTIER_REGISTRY_USERNAME": USER, "KVTIER_REGISTRY_PASSWORD": PASSWORD}
    with gpg_keys.make(tmp_path / "keys") as keys:
        sign = ["--sign", "--key", keys.plain.email, "--keyring", str(keys.plain.secring)]
        sign += ["--sign-key-url", "https://example.invalid/key.asc"]
        where = ["--registry", f"oci://{oci.host}/signed", "--plain-http", "--chart", "curvine"]
        result = kvtier(*where, "--destination", str(dist), *sign, env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        for major in (3, 4):
            config = tmp_path / f"registry{major}.json"
            reg = Registry(f"oci://{oci.host}", True, config, major, allow_override=False)
            reg.login(USER, PASSWORD)
            dest = tmp_path / f"pulled{major}"
            dest.mkdir()
            verify = ["--version", version, "--destination", str(dest)]
            verify += ["--verify", "--keyring", str(keys.pubring)]
            pulled = reg.helm(["pull", reg.ref("signed/curvine"), *verify])
            assert pulled.returncode == 0, pulled.stdout + pulled.stderr
            prov = f"curvine-{version}.tgz.prov"
            assert (dest / prov).read_bytes() == (dist / prov).read_bytes()
            unsigned = reg.helm(["pull", reg.ref("charts/curvine"), *verify])
            assert unsigned.returncode != 0, "the unsigned publish has no provenance to verify"
            assert "failed to fetch provenance" in unsigned.stderr, unsigned.stderr
