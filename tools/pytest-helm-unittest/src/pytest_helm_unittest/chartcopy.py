"""A throw-away copy of a chart shaped the way helm-unittest renders it.

helm-unittest renders in-process with only the selected templates (plus partials), never checks
`kubeVersion` or missing dependencies, and can override chart version/appVersion. The pinned Helm
binary does check those, so the copy drops what helm-unittest ignores, and adds one probe template
per chart that prints every kept template's raw output (base64), empty ones and NOTES.txt included.
"""

from __future__ import annotations

import functools
import hashlib
import re
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

from pytest_helm_unittest import batchtpl, fakecluster, goemit, govalues, tplrewrite

PROBE = "!kvtier-probe.yaml"  # "!" sorts it last, so a real template's error is reported first
PROBE_KEY = "kvtier-probe"
_PROBE_BODY = """{{- $base := $.Template.BasePath -}}
{{- $rel := dict %(release)s "Service" $.Release.Service -}}
%(key)s:
{{- range $name := list %(names)s }}
{{- $path := printf "%%s/%%s" $base $name }}
{{- $ctx := dict "Values" $.Values "Chart" %(chart)s "Capabilities" $.Capabilities "Files" $.Files }}
{{- $_ := set $ctx "Subcharts" $.Subcharts }}
{{- $_ := set $ctx "Release" $rel }}
{{- $_ := set $ctx "Template" (dict "Name" $path "BasePath" $base) }}
  {{ $path | quote }}: {{ include $path $ctx | b64enc | quote }}
{{- end }}
"""


@dataclass(frozen=True)
class Rewrites:
    """What the copy's templates are rewritten to serve as helm-unittest does (see tplrewrite)."""

    apis: tuple[str, ...] | None = None  # the test's .Capabilities.APIVersions (None: leave as Helm's)
    release_name: str | None = None  # .Release.Name where Helm renders under a stand-in
    lookup_define: str = ""  # kubernetesProvider's `kvtier.lookup`; "" keeps Helm's empty lookup


@functools.cache
def reads_api_versions(chart_dir: Path) -> bool:
    """Whether any template of the chart tree mentions .Capabilities.APIVersions (else no rewrite)."""
    return any(
        "APIVersions" in path.read_text(errors="replace")
        for path in chart_dir.rglob("*")
        if "templates" in path.parts and path.is_file()
    )


def _rewrite_templates(copy: Path, rewrites: Rewrites) -> None:
    if rewrites.lookup_define:
        (copy / "templates").mkdir(exist_ok=True)
        (copy / "templates" / fakecluster.PARTIAL).write_text(rewrites.lookup_define)
    generated = {PROBE, batchtpl.PARTIAL, fakecluster.PARTIAL}
    for path in sorted(copy.rglob("*")):
        if "templates" not in path.relative_to(copy).parts or path.name in generated or not path.is_file():
            continue
        text = path.read_text(errors="surrogateescape")
        new = tplrewrite.rewrite(
            text,
            apis=rewrites.apis,
            release_name=rewrites.release_name,
            lookup=bool(rewrites.lookup_define),
        )
        if new != text:
            path.write_text(new, errors="surrogateescape")


def template_pattern(route: str, name: str) -> re.Pattern[str]:
    """helm-unittest's glob for a template name: `*` and `**` over [0-9a-zA-Z_-/.], unanchored."""
    if not name.startswith(("templates", "charts", "crds", "**")):
        name = "templates/" + name
    text = f"{route}/{name}".replace("//", "/")
    out = []
    i = 0
    while i < len(text):
        if text.startswith("**", i):
            out.append(r"[0-9a-zA-Z_\-/\.]+")
            i += 2
        elif text[i] == "*":
            out.append(r"[0-9a-zA-Z_\-/\.]*")
            i += 1
        else:
            out.append(re.escape(text[i]))
            i += 1
    return re.compile("".join(out))


# Versions Helm's chart loader accepts (Masterminds semver), kept strict: a version outside this set
# is shown to templates through the probe instead, which renders the same either way.
_HELM_SEMVER = re.compile(
    r"^v?(0|[1-9]\d{0,17})(\.(0|[1-9]\d{0,17})){0,2}"
    r"(-(0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*)?"
    r"(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$"
)
STAND_IN_VERSION = "0.0.0-kvtier.stand-in"
_METADATA_FIELDS = [
    "Name", "Home", "Sources", "Version", "Description", "Keywords", "Maintainers", "Icon", "APIVersion",
    "Condition", "Tags", "AppVersion", "Deprecated", "Annotations", "KubeVersion", "Dependencies", "Type",
    "IsRoot",
]  # fmt: skip


def helm_loads_version(version: str) -> bool:
    """Whether Helm's chart loader accepts `version` in Chart.yaml (strictly: when unsure, no)."""
    return _HELM_SEMVER.match(version) is not None


def chart_expr(version: str) -> str:
    """What the probe passes templates as .Chart: Helm's own, or, for a `chart.version` override Helm's
    loader would refuse (helm-unittest sets it after loading, unchecked), a copy showing that version."""
    if not version:
        return "$.Chart"
    fields = " ".join(
        f'"{name}" {_go_quote(version) if name == "Version" else "$.Chart." + name}'
        for name in _METADATA_FIELDS
    )
    return f"(dict {fields})"


def chart_name(chart_dir: Path) -> str:
    meta = govalues.load((chart_dir / "Chart.yaml").read_text()) or {}
    return str(meta.get("name", chart_dir.name))


def _unpack_subcharts(charts_dir: Path) -> None:
    for archive in sorted(charts_dir.glob("*.tgz")):
        with tarfile.open(archive) as tar:
            tar.extractall(charts_dir, filter="data")
        archive.unlink()


def _prepare(
    chart_dir: Path,
    route: str,
    target_route: str,
    include: list[str],
    exclude: list[str],
    overrides: dict[str, str],
    release: dict[str, object],
    is_top: bool,
    batch: bool = False,
    path: tuple[str, ...] = (),
) -> None:
    meta_path = chart_dir / "Chart.yaml"
    meta = govalues.load(meta_path.read_text()) or {}
    meta.pop("kubeVersion", None)
    library = str(meta.get("type", "")).lower() == "library"
    if library:
        meta["type"] = "application"  # `helm template` refuses a library chart; its templates go below
    shown = ""  # a version only the probe shows (see chart_expr)
    for key in ("version", "appVersion"):
        if overrides.get(key):
            meta[key] = overrides[key]
    if overrides.get("version") and not helm_loads_version(overrides["version"]):
        shown, meta["version"] = overrides["version"], STAND_IN_VERSION
    charts_dir = chart_dir / "charts"
    present: dict[str, Path] = {}
    if charts_dir.is_dir():
        _unpack_subcharts(charts_dir)
        for sub in sorted(p for p in charts_dir.iterdir() if (p / "Chart.yaml").is_file()):
            present[chart_name(sub)] = sub
    if meta.get("dependencies"):
        meta["dependencies"] = [d for d in meta["dependencies"] if d.get("name") in present]
        if is_top and overrides.get("version"):
            # helm-unittest sets the version after resolving dependencies; keep Helm's range check happy
            for dep in meta["dependencies"]:
                dep["version"] = overrides["version"] if not shown else STAND_IN_VERSION
    meta_path.write_text(goemit.dump(meta))
    for name, sub in present.items():
        sub_overrides = overrides if is_top else {}
        _prepare(
            sub,
            f"{route}/charts/{name}",
            target_route,
            include,
            exclude,
            sub_overrides,
            release,
            False,
            batch,
            (*path, name),
        )
    _filter_templates(
        chart_dir, route, target_route, include, exclude, release, batch, path, library, shown
    )  # path: subchart names
    if batch and is_top:
        (chart_dir / "templates").mkdir(exist_ok=True)
        (chart_dir / "templates" / batchtpl.PARTIAL).write_text(batchtpl.DEFINES)


def _filter_templates(
    chart_dir: Path,
    route: str,
    target_route: str,
    include: list[str],
    exclude: list[str],
    release: dict[str, object],
    batch: bool = False,
    chart_path: tuple[str, ...] = (),
    library: bool = False,
    shown_version: str = "",
) -> None:
    templates_dir = chart_dir / "templates"
    if not templates_dir.is_dir():
        if not batch:
            return
        templates_dir.mkdir()
    wanted = [template_pattern(target_route, p) for p in include]
    unwanted = [template_pattern(target_route, p) for p in exclude]
    kept: list[str] = []
    for path in sorted(p for p in templates_dir.rglob("*") if p.is_file()):
        rel = path.relative_to(templates_dir).as_posix()
        if path.name.startswith("_"):
            continue
        full = f"{route}/templates/{rel}"
        # Helm's engine renders nothing of a library chart but its partials (isTemplateValid)
        wanted_here = any(p.search(full) for p in wanted) and not any(p.search(full) for p in unwanted)
        selected = wanted_here and not library
        if selected:
            kept.append(rel)
        else:
            path.unlink()
    names = " ".join(_go_quote(n) for n in kept)
    fields = " ".join(f"{_go_quote(k)} {_go_literal(v)}" for k, v in release.items())
    if batch:
        # Batch copies render templates only through the probe, once per test: as partials they are
        # parsed (so `include` finds them) but not executed on their own with the wrong values.
        pairs = []
        for rel in kept:
            hidden = "/".join([*rel.split("/")[:-1], batchtpl.HIDDEN + rel.split("/")[-1]])
            (templates_dir / rel).rename(templates_dir / hidden)
            pairs.append(f"(list {_go_quote(rel)} {_go_quote(hidden)})")
        subcharts = " ".join(_go_quote(p) for p in chart_path)
        body = batchtpl.PROBE % {
            "key": PROBE_KEY,
            "pairs": " ".join(pairs),
            "release": fields,
            "path": subcharts,
            "chart": chart_expr(shown_version),
        }
    else:
        body = _PROBE_BODY % {
            "key": PROBE_KEY,
            "names": names,
            "release": fields,
            "chart": chart_expr(shown_version),
        }
    (templates_dir / PROBE).write_text(body)


def _go_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def prepare_copy(
    workdir: Path,
    chart_dir: Path,
    target_route: str,
    include: list[str],
    exclude: list[str],
    overrides: dict[str, str],
    release: dict[str, object],
    batch: bool = False,
    rewrites: Rewrites | None = None,
) -> Path:
    """Copy chart_dir under workdir, filtered for one suite; returns the copy's directory.

    `release` (Name, Namespace, Revision, IsInstall, IsUpgrade) is what templates see as .Release in
    the probe: helm-unittest's defaults (RELEASE-NAME, revision 0) are not valid for `helm template`.
    """
    key = repr(
        (
            str(chart_dir),
            target_route,
            include,
            exclude,
            sorted(overrides.items()),
            sorted(release.items()),
            batch,
            rewrites,
        )
    )
    dest = workdir / hashlib.sha256(key.encode()).hexdigest()[:16] / chart_dir.name
    if (dest / "Chart.yaml").is_file():
        return dest
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(chart_dir, tmp, ignore=shutil.ignore_patterns(".git"))
    _prepare(tmp, chart_name(tmp), target_route, include, exclude, overrides, release, True, batch)
    _rewrite_templates(tmp, rewrites or Rewrites())
    tmp.rename(dest)
    return dest


def _go_literal(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return _go_quote(str(value))
