"""Who can write the L2 directory Curvine's CSI controller creates, as the chart judges it (l2AccessCheck,
rule l2-writable-by-engines): curvine-cli records its own UID/GID as each new volume directory's owner and
`0777 & ~umask` as its mode, and curvine-fuse mounts with default_permissions, so the kernel's rules apply:
the owner writes in every mode, a member of the directory's group in `group` and `world` modes, anyone in
`world` mode (CurvineIO/curvine v0.4.1 curvine-cli/src/cmds/fs/mkdir.rs, curvine-config fuse_conf.rs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from render import helm_bin, render

from kvtier import paths
from kvtier.validate.inputs import merge

BASE = paths.VALUES / "prod-g6e-4xlarge.yaml"
ENGINE = {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000}


@pytest.fixture(autouse=True)
def _helm(need) -> None:
    need(helm_bin(3).exists(), "pinned Helm not built: run `make tools`")


def _render(tmp_path: Path, pod: dict[str, Any], access: dict[str, Any]):
    overlay = tmp_path / "access.yaml"
    overlay.write_text(
        yaml.safe_dump({"engine": {"podSecurityContext": pod}, "curvine": {"csi": {"volumeAccess": access}}})
    )
    # Helm merges maps: the chart's and the environment's identity keys that `pod` lacks are nulled (deleted).
    written = merge.chart_defaults()["engine"]["podSecurityContext"] | (
        yaml.safe_load(BASE.read_text()).get("engine", {}).get("podSecurityContext") or {}
    )
    reset = tmp_path / "reset.yaml"
    gone = [
        k
        for k in ("runAsUser", "runAsGroup", "fsGroup", "supplementalGroups")
        if k in written and k not in pod
    ]
    reset.write_text(yaml.safe_dump({"engine": {"podSecurityContext": dict.fromkeys(gone)}}))
    return render("kv-tiered-inference", values=[BASE, reset, overlay])


def test_the_environments_let_the_engines_write(tmp_path: Path) -> None:
    result = render("kv-tiered-inference", values=[BASE])
    assert result.returncode == 0, result.stderr[-800:]


@pytest.mark.parametrize(
    ("pod", "access"),
    [
        (ENGINE, {"uid": 1000, "gid": 5, "mode": "owner"}),  # the owner writes in every mode
        ({**ENGINE, "runAsUser": 2000}, {"uid": 1000, "gid": 1000, "mode": "group"}),  # runAsGroup/fsGroup
        ({"runAsUser": 2000, "fsGroup": 3000}, {"uid": 1000, "gid": 3000, "mode": "group"}),
        ({"runAsUser": 2000, "supplementalGroups": [7]}, {"uid": 1000, "gid": 7, "mode": "group"}),
        ({}, {"uid": 1000, "gid": 1000, "mode": "world"}),  # the explicit opt-in: any UID
    ],
)
def test_allowed(tmp_path: Path, pod: dict[str, Any], access: dict[str, Any]) -> None:
    result = _render(tmp_path, pod, access)
    assert result.returncode == 0, result.stderr[-800:]


@pytest.mark.parametrize(
    ("pod", "access", "words"),
    [
        ({**ENGINE, "runAsUser": 2000}, {"uid": 1000, "gid": 1000, "mode": "owner"}, "mode 0755 (owner)"),
        ({"runAsUser": 2000, "fsGroup": 3000}, {"uid": 1000, "gid": 1000, "mode": "group"}, "fsGroup 3000"),
        ({"runAsUser": 2000}, {"uid": 1000, "gid": 1000, "mode": "group"}, "runAsGroup unset, fsGroup unset"),
        ({"runAsUser": 2000, "supplementalGroups": [7]}, {"uid": 1000, "gid": 8, "mode": "group"}, "1000:8"),
        ({"fsGroup": 1000}, {"uid": 1000, "gid": 1000, "mode": "group"}, "runAsUser: it is unset"),
    ],
)
def test_denied(tmp_path: Path, pod: dict[str, Any], access: dict[str, Any], words: str) -> None:
    result = _render(tmp_path, pod, access)
    assert result.returncode != 0
    assert "[l2-writable-by-engines]" in result.stderr and words in result.stderr, result.stderr[-800:]
