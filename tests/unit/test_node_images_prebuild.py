"""`make node-images` (kvtier.cluster.realnode.prebuild): what it does where a part is missing or fails."""

from __future__ import annotations

import pytest

from kvtier.cluster.realnode import prebuild
from kvtier.errors import UserError


@pytest.fixture
def can_run_a_node(monkeypatch) -> None:
    monkeypatch.setattr(prebuild.realnode, "preconditions", lambda: [])
    monkeypatch.setattr(prebuild.nodebins, "missing", lambda: [])


def test_a_machine_without_the_node_programs_builds_nothing_and_says_why(monkeypatch, capsys) -> None:
    monkeypatch.setattr(prebuild.realnode, "preconditions", lambda: ["needs root"])
    monkeypatch.setattr(prebuild.nodebins, "missing", lambda: ["kubelet"])
    monkeypatch.setattr(prebuild, "_engine", lambda: pytest.fail("built on a machine that cannot run a node"))
    assert prebuild.main() == 0
    out = capsys.readouterr().out
    assert "skipped" in out and "needs root" in out and "kubelet" in out and "make node-tools" in out


def test_a_failed_image_fails_the_set_up_and_the_other_is_still_built(
    can_run_a_node, monkeypatch, capsys
) -> None:
    def broken() -> str:
        raise UserError("mmdebstrap failed (exit 1)")

    monkeypatch.setattr(prebuild, "_engine", lambda: "kvtier.local/engine:abc")
    monkeypatch.setattr(prebuild, "_cluster_and_curvine", broken)
    assert prebuild.main() == 1
    out = capsys.readouterr().out
    assert "kvtier.local/engine:abc" in out and "FAILED: mmdebstrap failed (exit 1)" in out


def test_absent_curvine_binaries_skip_only_curvine_images(can_run_a_node, monkeypatch, capsys) -> None:
    class Built:
        def __init__(self, ref: str) -> None:
            self.ref = ref

    monkeypatch.setattr(prebuild.images, "all_images", lambda progress: [Built("kvtier.local/python:1")])
    monkeypatch.setattr(
        prebuild.curvine_binaries, "missing", lambda: "Curvine binaries not found: set KVTIER_CURVINE_BIN"
    )
    monkeypatch.setattr(prebuild.curvine_images, "all_images", lambda progress: pytest.fail("no binaries"))
    monkeypatch.setattr(prebuild, "_engine", lambda: "engine image skipped: no venv")
    assert prebuild.main() == 0
    out = capsys.readouterr().out
    assert "kvtier.local/python:1; Curvine images skipped: Curvine binaries not found" in out
