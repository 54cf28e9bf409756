"""The configuration files the charts render: LMCache's YAML and Curvine's TOML.

The checks themselves belong to their chart's owners: `kvtier.lmcache_config` (LMCache's own loader,
no unknown keys) and `kvtier.curvine_config` (the known Curvine key set). This module finds the files
in the rendered ConfigMaps and calls them. When a checker is missing the check is reported as
"not available", never as passed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from kvtier.validate.findings import CURVINE, LMCACHE, Finding

# module, candidate function names (text -> list of problems), how to recognise the file in a ConfigMap
CHECKERS: dict[str, tuple[str, tuple[str, ...], Callable[[str], bool]]] = {
    LMCACHE: (
        "kvtier.lmcache_config",
        ("check_text", "check", "validate_text"),
        lambda key: "lmcache" in key.lower() and key.endswith((".yaml", ".yml")),
    ),
    CURVINE: (
        "kvtier.curvine_config",
        ("check_text", "check", "validate_text"),
        lambda key: key.endswith(".toml"),
    ),
}


def find_files(manifests: list[dict[str, Any]], check: str) -> list[tuple[str, str]]:
    """(ConfigMap/name:key, text) of every rendered file the check applies to."""
    match = CHECKERS[check][2]
    out = []
    for m in manifests:
        if m.get("kind") == "ConfigMap":
            for key, text in (m.get("data") or {}).items():
                if match(str(key)) and isinstance(text, str):
                    out.append((f"ConfigMap/{(m.get('metadata') or {}).get('name')}:{key}", text))
    return out


def checker(check: str) -> tuple[Callable[[str], Any] | None, str]:
    """The checker function, or None and why it is not available."""
    module_name, names, _ = CHECKERS[check]
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        return None, f"{module_name} is missing ({error})"
    for name in names:
        fn = getattr(module, name, None)
        if callable(fn):
            return fn, ""
    return None, f"{module_name} has none of {', '.join(names)}"


def run(manifests: list[dict[str, Any]], check: str, file: str) -> tuple[list[Finding] | None, str]:
    """Findings for each rendered file; (None, why) when the check cannot run."""
    files = find_files(manifests, check)
    if not files:
        return None, "nothing rendered"
    fn, why = checker(check)
    if fn is None:
        return None, why
    findings = []
    for subject, text in files:
        try:
            problems = fn(text)
        except Exception as error:  # a checker failing is reported, not raised: the other checks go on
            return None, f"{CHECKERS[check][0]} failed: {type(error).__name__}: {error}"
        for problem in problems or []:
            findings.append(
                Finding(check, f"{check.split()[0].lower()}.config", str(problem), file, subject=subject)
            )
    return findings, f"{len(files)} file(s)"
