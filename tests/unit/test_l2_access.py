"""Who can write the L2 directory Curvine's CSI controller creates: the logic behind l2-writable-by-engines,
checked on the chart defaults and on each access mode."""

from __future__ import annotations

from typing import Any

import pytest

from kvtier.validate import merge
from kvtier.validate.l2_access_rules import write_denied

ENGINE = {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000}


def test_chart_defaults_let_the_engines_write() -> None:
    defaults = merge.chart_defaults()
    assert (
        write_denied(defaults["engine"]["podSecurityContext"], defaults["curvine"]["csi"]["volumeAccess"])
        is None
    )


@pytest.mark.parametrize(
    ("pod", "access"),
    [
        (ENGINE, {"uid": 1000, "gid": 5, "mode": "owner"}),  # the owner writes in every mode
        (
            {**ENGINE, "runAsUser": 2000},
            {"uid": 1000, "gid": 1000, "mode": "group"},
        ),  # via runAsGroup/fsGroup
        ({"runAsUser": 2000, "fsGroup": 3000}, {"uid": 1000, "gid": 3000, "mode": "group"}),
        ({"runAsUser": 2000, "supplementalGroups": [7]}, {"uid": 1000, "gid": 7, "mode": "group"}),
        ({}, {"uid": 1000, "gid": 1000, "mode": "world"}),  # the explicit opt-in: any UID
    ],
)
def test_allowed(pod: dict[str, Any], access: dict[str, Any]) -> None:
    assert write_denied(pod, access) is None


@pytest.mark.parametrize(
    ("pod", "access", "words"),
    [
        ({**ENGINE, "runAsUser": 2000}, {"uid": 1000, "gid": 1000, "mode": "owner"}, "mode 0755 (owner)"),
        ({"runAsUser": 2000, "fsGroup": 3000}, {"uid": 1000, "gid": 1000, "mode": "group"}, "groups [3000]"),
        ({"runAsUser": 2000}, {"uid": 1000, "gid": 1000, "mode": "group"}, "groups none"),
        ({"fsGroup": 1000}, {"uid": 1000, "gid": 1000, "mode": "group"}, "runAsUser is unset"),
    ],
)
def test_denied(pod: dict[str, Any], access: dict[str, Any], words: str) -> None:
    reason = write_denied(pod, access)
    assert reason is not None and words in reason
