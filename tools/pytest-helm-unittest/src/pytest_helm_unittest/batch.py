"""Render many tests of one chart in a single `helm template` run (see batchtpl for the templates).

Only requests that share everything but their user values are batched, and only while the chart
has no aliases, import-values or nested dependencies. Every member's coalesced values are checked
against the charts' JSON Schemas here (a member that fails is rendered on its own, so its error is
Helm's). The batch is trusted only if one member rendered on its own gives byte-identical output;
otherwise every member is rendered on its own.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import yaml

from pytest_helm_unittest import batchtpl, chartcopy, goemit, govalues
from pytest_helm_unittest.request import RenderRequest, RenderResult

_SOURCE = re.compile(r"^# Source: (.+)$", re.M)


def descriptor(chart_dir: Path) -> dict[str, Any] | None:
    """What the batch templates need to know of a chart tree, or None when it cannot be batched."""
    meta = govalues.load((chart_dir / "Chart.yaml").read_text()) or {}
    subdirs = {}
    if (chart_dir / "charts").is_dir():
        subdirs = {
            chartcopy.chart_name(p): p
            for p in (chart_dir / "charts").iterdir()
            if (p / "Chart.yaml").is_file()
        }
    listed = [d for d in meta.get("dependencies") or [] if isinstance(d, dict)]
    if set(subdirs) != {d.get("name") for d in listed}:
        return None  # unlisted subcharts are always enabled in Helm: keep it simple, render singly
    deps = []
    for dep in listed:
        if dep.get("alias") or dep.get("import-values"):
            return None
        sub = descriptor(subdirs[dep["name"]])
        if sub is None or sub["deps"]:
            return None
        tags = dep.get("tags") or []
        deps.append(
            {"name": dep["name"], "condition": str(dep.get("condition") or ""), "tags": tags, "chart": sub}
        )
    values = chart_dir / "values.yaml"
    return {"defaults": values.read_text() if values.is_file() else "", "deps": deps}


_FILE_INCLUDE = re.compile(r"""\b(?:include|template)\s+(?:\(|\$|\.|"[^"]*\.(?:ya?ml|tpl|txt|json)")""")


def include_safe(chart_dir: Path) -> bool:
    """True when no template includes another template file (only named defines): then rendering
    more templates than a suite selects cannot change the selected ones, and suites with different
    `templates:` can share a batch."""
    for path in chart_dir.rglob("*"):
        if (
            "templates" in path.parts
            and path.is_file()
            and _FILE_INCLUDE.search(path.read_text(errors="replace"))
        ):
            return False
    return True


def group_key(req: RenderRequest, safe: bool) -> RenderRequest:
    """Requests with equal keys can share a batch render."""
    if safe:
        return dataclasses.replace(req, values_yaml="", include=("**",), exclude=())
    return dataclasses.replace(req, values_yaml="")


def selected(req: RenderRequest, files: dict[str, str]) -> dict[str, str]:
    """A batch member's share of the output: the templates its suite selects."""
    wanted = [chartcopy.template_pattern(req.target_route, p) for p in req.include]
    unwanted = [chartcopy.template_pattern(req.target_route, p) for p in req.exclude]
    return {
        name: text
        for name, text in files.items()
        if any(p.search(name) for p in wanted) and not any(p.search(name) for p in unwanted)
    }


def condition_key(user: dict[str, Any], desc: dict[str, Any]) -> str:
    """The user values that decide which subcharts are enabled (members must agree on them)."""
    picked = []
    for dep in desc["deps"]:
        for cond in dep["condition"].split(","):
            node: Any = user
            for part in cond.strip().split(".") if cond.strip() else []:
                node = node.get(part, "<unset>") if isinstance(node, dict) else "<unset>"
            picked.append(node)
    picked.append(user.get("tags"))
    return json.dumps(picked, sort_keys=True, default=str)


def schema_ok(copy_dir: Path, values: dict[str, Any], path: tuple[str, ...]) -> bool:
    chart_dir = copy_dir
    for name in path:
        chart_dir = next(p for p in (chart_dir / "charts").iterdir() if chartcopy.chart_name(p) == name)
    schema_file = chart_dir / "values.schema.json"
    if not schema_file.is_file():
        return True
    import jsonschema  # on first use: loading the plugin (every pytest session) stays as cheap as before

    schema = json.loads(schema_file.read_text())
    validator_cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    return not any(True for _ in validator_cls(schema).iter_errors(values))


def batch_values(members: list[dict[str, Any]], desc: dict[str, Any], select: list[list[str]]) -> str | None:
    """The one values file of the batch: the first member's values plus every member's under global,
    with the templates each member's suite selects."""
    first = dict(members[0])
    glob = first.get("global", {})
    if not isinstance(glob, dict):
        return None
    first["global"] = {**glob, "__kvtier_batch": {"members": members, "chart": desc, "select": select}}
    return goemit.dump(first)


def templates_of(copy_dir: Path) -> list[str]:
    """Full names (`<top>/charts/<sub>/templates/x.yaml`) of the templates a batch copy renders."""
    names = []
    top = chartcopy.chart_name(copy_dir)
    for probe in copy_dir.rglob(chartcopy.PROBE):
        templates_dir = probe.parent
        route_parts = [top, *[chartcopy.chart_name(p) for p in _chart_chain(copy_dir, templates_dir.parent)]]
        route = "/charts/".join(route_parts)
        for hidden in templates_dir.rglob(batchtpl.HIDDEN + "*"):
            rel = hidden.relative_to(templates_dir).as_posix()
            original = "/".join([*rel.split("/")[:-1], hidden.name.removeprefix(batchtpl.HIDDEN)])
            names.append(f"{route}/templates/{original}")
    return names


def _chart_chain(top: Path, chart_dir: Path) -> list[Path]:
    """The subchart directories from the top chart down to chart_dir."""
    chain = []
    while chart_dir != top:
        chain.append(chart_dir)
        chart_dir = chart_dir.parent.parent  # <parent>/charts/<sub>
    return list(reversed(chain))


def selection(reqs: list[RenderRequest], names: list[str]) -> list[list[str]]:
    return [sorted(selected(req, dict.fromkeys(names, ""))) for req in reqs]


def parse(stdout: str, count: int) -> tuple[list[dict[str, str]], list[dict[tuple[str, ...], Any]]]:
    """Per member: template -> raw output, and chart path -> coalesced values."""
    files: list[dict[str, str]] = [{} for _ in range(count)]
    values: list[dict[tuple[str, ...], Any]] = [{} for _ in range(count)]
    sources = list(_SOURCE.finditer(stdout))
    for i, match in enumerate(sources):
        source = match.group(1)
        if not source.endswith("/" + chartcopy.PROBE):
            continue
        end = sources[i + 1].start() if i + 1 < len(sources) else len(stdout)
        doc = yaml.load(stdout[match.end() : end].rsplit("\n---", 1)[0], Loader=yaml.CSafeLoader) or {}
        parts = source.split("/")[:-2]  # <top>/charts/<sub>/templates/<probe>
        path = tuple(parts[2::2])
        for idx, entries in (doc.get(chartcopy.PROBE_KEY) or {}).items():
            for name, encoded in (entries or {}).items():
                text = base64.b64decode(encoded or "").decode("utf-8", errors="replace")
                if name == "__values":
                    values[int(idx)][path] = json.loads(text)
                else:
                    files[int(idx)][name] = text.replace("<no value>", "")
    return files, values


def members_of(requests: list[RenderRequest]) -> list[dict[str, Any]]:
    return [govalues.load_plain(r.values_yaml) or {} for r in requests]


def accept(result: RenderResult, files: dict[str, str]) -> bool:
    return result.error is None and result.files == files
