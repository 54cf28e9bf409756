"""What a local cluster may be called: the name becomes a folder, a network namespace and kubeconfig
names, so it carries no path and stays short."""

from __future__ import annotations

import re

PATTERN = re.compile(r"[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?")
RULE = "lowercase letters, digits and '-', at most 40, starting and ending with a letter or digit"


def valid(name: str) -> bool:
    return PATTERN.fullmatch(name) is not None
