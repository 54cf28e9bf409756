"""Publish both charts to a loopback OCI registry, pull the umbrella back, install it on the control plane.

The registry is the real CNCF distribution server (basic auth, plain HTTP on 127.0.0.1); the cluster is
the project's kube-apiserver + KWOK on loopback (`kube_cluster`). Each Helm major pulls and installs the
umbrella from the registry, not from the checkout; the objects Helm reports are then read back from the
API server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from harness import registry_server
from kvtier import paths
from kvtier.publish.registry import Registry

USER, PASSWORD = "publisher", "loopback-only-password"
UMBRELLA = "kv-tiered-inference"


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory, need) -> Iterator[registry_server.LocalRegistry]:
    missing = [t for t in ("registry", "helm3", "helm4") if not (paths.TOOLS_BIN / t).exists()]
    need(not missing, f"pinned {missing} not built (make tools)")
    import bcrypt

    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=5)).decode()
    with registry_server.serve(tmp_path_factory.mktemp("registry"), htpasswd=f"{USER}:{hashed}") as server:
        env = {k: v for k, v in os.environ.items() if k != "KVTIER_HELM"}
        env |= {"KVTIER_REGISTRY_USERNAME": USER, "KVTIER_REGISTRY_PASSWORD": PASSWORD}
        dest = tmp_path_factory.mktemp("dist")
        command = ["package", "--registry", f"oci://{server.host}/charts", "--plain-http", "--destination"]
        result = subprocess.run(
            [sys.executable, "-m", "kvtier.cli", *command, str(dest)],
            capture_output=True,
            text=True,
            env=env,
            cwd=paths.ROOT,
            timeout=600,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        yield server


def _helm(major: int, kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(paths.TOOLS_BIN / f"helm{major}"), "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.parametrize("major", [3, 4])
def test_pulled_umbrella_installs_on_the_control_plane(
    published, kube_cluster: Path, make_namespace, static_pvs, tmp_path: Path, major: int, need
) -> None:
    need((paths.TOOLS_BIN / "kubectl").exists(), "pinned kubectl not built (make cluster-tools)")
    version = str(yaml.safe_load((paths.CHARTS / UMBRELLA / "Chart.yaml").read_text())["version"])
    reg = Registry(
        f"oci://{published.host}/charts", True, tmp_path / "registry.json", major, allow_override=False
    )
    reg.login(USER, PASSWORD)
    pulled = reg.pull(UMBRELLA, version, tmp_path / "pulled")

    release = f"oci{major}-{uuid.uuid4().hex[:5]}"  # the cluster may be reused: fresh names each run
    namespace = make_namespace(
        f"registry-roundtrip-{release}", enforce="privileged"
    )  # the CSI node is privileged
    static_pvs(release, f"{release}-curvine", 2)  # the L2 claim's class, `<release>-curvine`
    static_pvs(release, "", 3)  # masters' meta/journal claims (cluster default class: none here)
    install = _helm(major, kube_cluster, "install", release, str(pulled), "-n", namespace, "--timeout", "5m")
    try:
        assert install.returncode == 0, install.stdout + install.stderr
        listed = json.loads(_helm(major, kube_cluster, "list", "-n", namespace, "-o", "json").stdout)
        assert [(r["name"], r["chart"], r["status"]) for r in listed] == [
            (release, f"{UMBRELLA}-{version}", "deployed")
        ]

        manifest = _helm(major, kube_cluster, "get", "manifest", release, "-n", namespace).stdout
        objects = [d for d in yaml.safe_load_all(manifest) if d]
        assert any(o["kind"] == "StatefulSet" and "curvine" in o["metadata"]["name"] for o in objects), (
            "the pulled umbrella carries its curvine dependency"
        )
        (tmp_path / "manifest.yaml").write_text(manifest)
        kubectl = [str(paths.TOOLS_BIN / "kubectl"), "--kubeconfig", str(kube_cluster), "-n", namespace]
        found = subprocess.run(
            [*kubectl, "get", "-f", str(tmp_path / "manifest.yaml"), "-o", "name"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert found.returncode == 0, found.stderr
        assert len(found.stdout.split()) == len(objects), "every object Helm installed is in the API server"
    finally:
        _helm(major, kube_cluster, "uninstall", release, "-n", namespace, "--wait", "--timeout", "2m")
