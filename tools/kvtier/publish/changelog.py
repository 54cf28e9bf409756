"""Release notes: each chart's CHANGELOG.md and the Artifact Hub annotations in its Chart.yaml.

CHANGELOG.md is the source: one `## <version> - <date>` section per version, entries grouped under
`### Added|Changed|Deprecated|Removed|Fixed|Security` (the Keep a Changelog headings, which are also
Artifact Hub's change kinds). `artifacthub.io/changes` must list the current version's entries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from kvtier.images.reference import is_pinned
from kvtier.publish.versioning import (
    Finding,
    Version,
    chart_meta,
    parse_version,
    version_findings,
    version_line,
)

KINDS = ("added", "changed", "deprecated", "removed", "fixed", "security")
_VERSION_HEADING = re.compile(r"^## \[?([^\]\s]+)\]?(?:\s+-\s+(\d{4}-\d{2}-\d{2}))?\s*$")
_KIND_HEADING = re.compile(r"^### (\w+)\s*$")
_SPDX = re.compile(r"^[A-Za-z0-9.+-]+( (AND|OR|WITH) [A-Za-z0-9.+-]+)*$")


@dataclass
class Section:
    version: str
    line: int
    entries: list[tuple[str, str]]  # (kind, description)


def parse(text: str) -> tuple[list[Section], list[tuple[int, str]]]:
    """Sections in file order, and (line, problem) pairs for lines that break the format."""
    sections: list[Section] = []
    problems: list[tuple[int, str]] = []
    kind = ""
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("## "):
            match = _VERSION_HEADING.match(line)
            if not match:
                problems.append((number, f"version heading {line!r} is not `## <version> - <YYYY-MM-DD>`"))
                continue
            sections.append(Section(match.group(1), number, []))
            kind = ""
        elif line.startswith("### "):
            match = _KIND_HEADING.match(line)
            kind = match.group(1).lower() if match else ""
            if kind not in KINDS:
                problems.append((number, f"heading {line!r} is not one of {', '.join(KINDS)} (capitalised)"))
                kind = ""
        elif line.startswith("- ") and sections:
            if not kind:
                problems.append((number, "entry outside a `### <Kind>` heading"))
                continue
            sections[-1].entries.append((kind, line[2:].strip()))
        elif line.startswith("  ") and line.strip() and sections and sections[-1].entries:
            k, description = sections[-1].entries[-1]  # a wrapped entry continues on indented lines
            sections[-1].entries[-1] = (k, f"{description} {line.strip()}")
    return sections, problems


def changelog_findings(chart_dir: Path) -> list[Finding]:
    path = chart_dir / "CHANGELOG.md"
    version = str(chart_meta(chart_dir)["version"])
    if not path.is_file():
        return [Finding("changelog-entry", path, 0, "the chart has no CHANGELOG.md")]
    sections, problems = parse(path.read_text())
    findings = [Finding("changelog-entry", path, line, problem) for line, problem in problems]
    seen: list[Version] = []
    for section in sections:
        try:
            parsed = parse_version(section.version)
        except ValueError as error:
            findings.append(Finding("changelog-entry", path, section.line, str(error)))
            continue
        if seen and not parsed < seen[-1]:
            findings.append(
                Finding(
                    "changelog-entry", path, section.line, f"{parsed} is not below {seen[-1]}: newest first"
                )
            )
        if not section.entries:
            findings.append(
                Finding("changelog-entry", path, section.line, f"section {parsed} has no entries")
            )
        seen.append(parsed)
    if not any(s.version == version for s in sections):
        findings.append(
            Finding("changelog-entry", path, 0, f"no `## {version}` section for the chart's version")
        )
    return findings


def current_entries(chart_dir: Path) -> list[tuple[str, str]]:
    path = chart_dir / "CHANGELOG.md"
    version = str(chart_meta(chart_dir)["version"])
    sections, _ = parse(path.read_text()) if path.is_file() else ([], [])
    return next((s.entries for s in sections if s.version == version), [])


def _annotation(chart_dir: Path, key: str) -> tuple[object, int, str]:
    """(parsed value or None, line of the key in Chart.yaml, parse error or '')."""
    annotations = chart_meta(chart_dir).get("annotations") or {}
    lines = (chart_dir / "Chart.yaml").read_text().splitlines()
    line = next((n for n, text in enumerate(lines, 1) if text.strip().startswith(f"{key}:")), 0)
    # An absent key is reported at the `annotations:` line, where it belongs.
    line = line or next((n for n, text in enumerate(lines, 1) if text.startswith("annotations:")), 0)
    raw = annotations.get(key)
    if raw is None:
        return None, line, ""
    if not isinstance(raw, str):
        return None, line, f"`{key}` must be a string (a YAML document inside `|`)"
    try:
        return yaml.safe_load(raw), line, ""
    except yaml.YAMLError as error:
        return None, line, f"`{key}` is not valid YAML: {error}"


def annotation_findings(chart_dir: Path) -> list[Finding]:
    chart_yaml = chart_dir / "Chart.yaml"
    findings: list[Finding] = []

    def bad(rule: str, line: int, message: str) -> None:
        findings.append(Finding(rule, chart_yaml, line or version_line(chart_dir), message))

    changes, line, error = _annotation(chart_dir, "artifacthub.io/changes")
    wanted = current_entries(chart_dir)
    if error or not isinstance(changes, list):
        bad("artifacthub-changes", line, error or "`artifacthub.io/changes` is missing or not a list")
    else:
        got = [
            (str(c.get("kind", "")), str(c.get("description", "")).strip())
            for c in changes
            if isinstance(c, dict)
        ]
        if len(got) != len(changes) or any(k not in KINDS for k, _ in got):
            bad(
                "artifacthub-changes", line, f"every item needs `kind` ({', '.join(KINDS)}) and `description`"
            )
        elif got != wanted:
            bad("artifacthub-changes", line, f"lists {got} but CHANGELOG.md's current section has {wanted}")

    images, line, error = _annotation(chart_dir, "artifacthub.io/images")
    if error or not isinstance(images, list) or not images:
        bad("artifacthub-annotation", line, error or "`artifacthub.io/images` is missing or empty")
    else:
        for item in images:
            image = str(item.get("image", "")) if isinstance(item, dict) else ""
            if not (isinstance(item, dict) and item.get("name") and image):
                bad("artifacthub-annotation", line, f"image item {item!r} needs `name` and `image`")
            elif not is_pinned(image):
                bad(
                    "artifacthub-annotation", line, f"image {image} needs a pinned tag or digest (not latest)"
                )

    license_text, line, error = _annotation(chart_dir, "artifacthub.io/license")
    if error or not isinstance(license_text, str) or not _SPDX.match(license_text):
        problem = "is missing" if license_text is None else f"{license_text!r} is not an SPDX identifier"
        bad("artifacthub-annotation", line, error or f"`artifacthub.io/license` {problem} (e.g. Apache-2.0)")

    links, line, error = _annotation(chart_dir, "artifacthub.io/links")
    if error or not isinstance(links, list) or not links:
        bad("artifacthub-annotation", line, error or "`artifacthub.io/links` is missing or empty")
    else:
        for item in links:
            if not (
                isinstance(item, dict)
                and item.get("name")
                and str(item.get("url", "")).startswith("https://")
            ):
                bad("artifacthub-annotation", line, f"link {item!r} needs `name` and an https `url`")
    return findings


def annotated_images(chart_dir: Path) -> set[str]:
    images, _, _ = _annotation(chart_dir, "artifacthub.io/images")
    if not isinstance(images, list):
        return set()
    return {str(i["image"]) for i in images if isinstance(i, dict) and i.get("image")}


def release_findings(chart_dir: Path) -> list[Finding]:
    """Everything a chart version needs before it is published (semver, changelog, annotations)."""
    return version_findings(chart_dir) + changelog_findings(chart_dir) + annotation_findings(chart_dir)
