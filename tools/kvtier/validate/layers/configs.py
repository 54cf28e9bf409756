"""The configuration files the charts render: LMCache's YAML and Curvine's TOML.

The checks themselves belong to their chart's owners: `kvtier.upstream.lmcache_config` (LMCache's own loader,
no unknown keys) and `kvtier.upstream.curvine_config` (the known Curvine key set). This module finds the files
in the rendered ConfigMaps and calls them. When a checker is missing the check is reported as
"not available", never as passed.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Callable
from typing import Any

from kvtier.errors import UserError
from kvtier.validate.findings import CURVINE, LMCACHE, UNAVAILABLE, Finding, Judged, NotRun, Outcome

# module, candidate function names (text -> list of problems), how to recognise the file in a ConfigMap
CHECKERS: dict[str, tuple[str, tuple[str, ...], Callable[[str], bool]]] = {
    LMCACHE: (
        "kvtier.upstream.lmcache_config",
        ("check_text",),
        lambda key: "lmcache" in key.lower() and key.endswith((".yaml", ".yml")),
    ),
    CURVINE: (
        "kvtier.upstream.curvine_config",
        ("check_text",),
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


def warm() -> None:
    """Import the checkers (LMCache's loader takes a while) ahead of use; failures surface later."""
    os.environ.setdefault("LMCACHE_LOG_LEVEL", "ERROR")  # no import chatter, as lmcache_config
    for module_name in ("lmcache.v1.config", *(c[0] for c in CHECKERS.values())):
        with contextlib.suppress(Exception):  # run() reports a checker that cannot load
            importlib.import_module(module_name)


def checker(check: str) -> tuple[Callable[..., Any] | None, str]:
    """The checker's `check_text(text, source)`, or None and why it is not available."""
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


def _problems(result: Any) -> list[tuple[str, str, str]]:
    """(rule, message, remedy) of each problem: a list of findings/strings, or an object with .findings."""
    items = result.findings if hasattr(result, "findings") else result
    out = []
    for item in items or []:
        if isinstance(item, str):
            out.append(("config", item, ""))
        else:
            key = getattr(item, "key", "")
            message = f"{key}: {item.message}" if key else str(getattr(item, "message", item))
            out.append((str(getattr(item, "rule", "config")), message, str(getattr(item, "remedy", ""))))
    return out


def run(manifests: list[dict[str, Any]], check: str, file: str) -> Outcome:
    """Findings for each rendered file; NotRun when there is no such file (skipped) or the checker itself
    cannot run (not available)."""
    files = find_files(manifests, check)
    if not files:
        return NotRun("no such config file in the render")
    fn, why = checker(check)
    if fn is None:
        return NotRun(why, UNAVAILABLE)
    prefix = "lmcache" if check == LMCACHE else "curvine"
    findings = []
    for subject, text in files:
        try:
            problems = _problems(fn(text, subject))
        except UserError as error:
            if "install" in str(error) or "not importable" in str(error):
                return NotRun(str(error), UNAVAILABLE)  # the checker's own prerequisite is missing
            problems = [("parse", str(error), "")]
        except Exception as error:  # a checker crashing is reported, not raised: the other checks go on
            return NotRun(f"{CHECKERS[check][0]} failed: {type(error).__name__}: {error}", UNAVAILABLE)
        for rule, message, remedy in problems:
            findings.append(
                Finding(check, f"{prefix}.{rule}", message, file, subject=subject, suggestion=remedy)
            )
    return Judged(findings, f"{len(files)} file(s)")
