"""Chart versions: semver parsing and the rule that a changed chart carries a higher version.

`changed_without_bump(chart_dir, base_ref)` is what `kvtier lint` calls: it compares the chart's
files in the working tree with `base_ref` (a git ref such as `origin/main`) and returns a finding
when something that ends up in the published package changed but `version:` in Chart.yaml did not
go up. Files the chart's .helmignore leaves out of the package (tests, CI scenarios) do not count.
"""

from __future__ import annotations

import fnmatch
import subprocess
from dataclasses import dataclass
from pathlib import Path

import semver
import yaml

from kvtier import paths
from kvtier.errors import UserError


@dataclass(frozen=True)
class Rule:
    id: str
    reason: str
    remedy: str


# Every release rule, declared once (also used by kvtier.publish.changelog).
RULES = {
    rule.id: rule
    for rule in (
        Rule(
            "version-semver",
            "Chart.yaml `version` must be a semantic version (MAJOR.MINOR.PATCH[-pre][+build])",
            "write a version such as 0.2.0",
        ),
        Rule(
            "version-bump",
            "the chart's packaged files changed since the base ref but its version did not go up",
            "raise `version` in Chart.yaml (patch: fixes, minor: new values, major: breaking values) "
            "and add a CHANGELOG.md section for it",
        ),
        Rule(
            "version-published",
            "a chart version in the registry is immutable: `kvtier package` never overwrites it",
            "raise `version` in Chart.yaml and add a CHANGELOG.md section, then publish again",
        ),
        Rule(
            "changelog-entry",
            "every chart version has a section in the chart's CHANGELOG.md",
            "add `## <version> - <YYYY-MM-DD>` with `### Added|Changed|...|Security` entry lists",
        ),
        Rule(
            "artifacthub-changes",
            "`artifacthub.io/changes` lists the CHANGELOG entries of the chart's current version",
            "copy the section's entries as `- kind: <added|changed|...>` / `description: <text>` items",
        ),
        Rule(
            "artifacthub-annotation",
            "Artifact Hub annotations (images, license, links) are present and well formed",
            "see docs/publishing.md#artifact-hub-annotations",
        ),
    )
}


@dataclass(frozen=True)
class Finding:
    """One broken rule, located in a file (line 0 when the whole file is meant)."""

    rule: str
    path: Path
    line: int
    message: str

    @property
    def remedy(self) -> str:
        return RULES[self.rule].remedy

    def __str__(self) -> str:
        try:
            where = self.path.relative_to(paths.ROOT)
        except ValueError:
            where = self.path
        location = f"{where}:{self.line}" if self.line else str(where)
        return f"{location}: [{self.rule}] {self.message}; {self.remedy}"


# python-semver implements SemVer 2.0.0's precedence (build metadata ignored, a release above its
# pre-releases), the order ct and Helm's Masterminds/semver give for the versions we accept.
Version = semver.Version


def parse_version(text: object) -> Version:
    """A strict SemVer 2.0.0 version (no `v` prefix, no missing parts); ValueError says what is wrong."""
    try:
        return Version.parse(str(text).strip())
    except ValueError:
        raise ValueError(
            f"{str(text)!r} is not a semantic version (MAJOR.MINOR.PATCH[-pre][+build])"
        ) from None


def chart_meta(chart_dir: Path) -> dict:
    path = chart_dir / "Chart.yaml"
    if not path.is_file():
        raise UserError(f"{path}: no Chart.yaml; is {chart_dir} a chart directory?")
    try:
        meta = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise UserError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(meta, dict) or not meta.get("name") or not meta.get("version"):
        raise UserError(f"{path}: needs `name` and `version` keys")
    return meta


def version_line(chart_dir: Path) -> int:
    """Line number of `version:` in Chart.yaml (for findings), 0 when not found."""
    for number, line in enumerate((chart_dir / "Chart.yaml").read_text().splitlines(), 1):
        if line.startswith("version:"):
            return number
    return 0


def version_findings(chart_dir: Path) -> list[Finding]:
    version = str(chart_meta(chart_dir)["version"])
    try:
        parse_version(version)
    except ValueError as error:
        return [Finding("version-semver", chart_dir / "Chart.yaml", version_line(chart_dir), str(error))]
    return []


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(paths.ROOT), *args], capture_output=True, text=True, check=False)


def ignore_patterns(chart_dir: Path) -> list[str]:
    """The rules of a chart's .helmignore; a UserError where Helm would refuse the file."""
    ignore = chart_dir / ".helmignore"
    if not ignore.is_file():
        return []
    patterns = []
    for number, raw in enumerate(ignore.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "**" in line:  # helm.sh/helm pkg/ignore parseRule refuses it, so `helm package` fails
            raise UserError(
                f"{ignore}:{number}: `{line}`: Helm's .helmignore does not support `**`; "
                "use `*` per path segment or a directory rule such as `docs/`"
            )
        patterns.append(line)
    return patterns


# Helm's rules, not gitignore's: pathspec's gitwildmatch disagrees on negation (Helm ignores whatever
# a negated rule does not match), which tests/charts/test_helmignore_vs_helm.py shows on `helm package`.
def _match(rule: str, path: str) -> bool:
    # Go's filepath.Match: `*` never crosses `/`, so match segment by segment.
    rule_parts, path_parts = rule.split("/"), path.split("/")
    return len(rule_parts) == len(path_parts) and all(
        fnmatch.fnmatchcase(p, r) for r, p in zip(rule_parts, path_parts, strict=True)
    )


def _ignored(path: str, is_dir: bool, patterns: list[str]) -> bool:
    """Helm's .helmignore decision for one path (helm.sh/helm/v3 pkg/ignore, Rules.Ignore)."""
    for raw in ["templates/.?*", *patterns]:  # Helm always adds the first rule
        negate = raw.startswith("!")
        rule = raw[1:] if negate else raw
        must_dir = rule.endswith("/")
        rule = rule.removesuffix("/")
        if rule.startswith("/"):
            hit = _match(rule[1:], path)
        elif "/" in rule:
            hit = _match(rule, path)
        else:
            hit = fnmatch.fnmatchcase(path.rsplit("/", 1)[-1], rule)  # no slash: the base name only
        if negate:  # Helm ignores whatever a negated rule does not match
            if (must_dir and not is_dir) or not hit:
                return True
            continue
        if (not must_dir or is_dir) and hit:
            return True
    return False


def packaged(relative: str, patterns: list[str]) -> bool:
    """Whether a chart-relative file goes into `helm package`: no parent directory ignored, nor itself."""
    parts = relative.split("/")
    parents = ("/".join(parts[:i]) for i in range(1, len(parts)))
    return not any(_ignored(d, True, patterns) for d in parents) and not _ignored(relative, False, patterns)


def changed_files(chart_dir: Path, base_ref: str) -> list[str]:
    """Chart-relative paths that differ between base_ref and the working tree (untracked included)."""
    if _git("rev-parse", "--verify", "--quiet", f"{base_ref}^{{commit}}").returncode != 0:
        raise UserError(
            f"git ref {base_ref!r} not found in {paths.ROOT}; fetch it first (e.g. `git fetch origin main`)"
        )
    rel = chart_dir.resolve().relative_to(paths.ROOT.resolve()).as_posix()
    diff = _git("diff", "--name-only", base_ref, "--", rel)
    new = _git("ls-files", "--others", "--exclude-standard", "--", rel)
    names = set(diff.stdout.split()) | set(new.stdout.split())
    return sorted(n.removeprefix(rel + "/") for n in names)


def changed_without_bump(chart_dir: Path, base_ref: str) -> list[Finding]:
    """A finding when the chart's packaged content changed since base_ref and its version did not rise."""
    chart_yaml = chart_dir / "Chart.yaml"
    rel = chart_yaml.resolve().relative_to(paths.ROOT.resolve()).as_posix()
    old = _git("show", f"{base_ref}:{rel}")
    if old.returncode != 0:
        if _git("rev-parse", "--verify", "--quiet", f"{base_ref}^{{commit}}").returncode != 0:
            raise UserError(f"git ref {base_ref!r} not found; fetch it first (e.g. `git fetch origin main`)")
        return []  # a chart new since base_ref: any version is a first release
    invalid = version_findings(chart_dir)
    if invalid:
        return invalid
    patterns = ignore_patterns(chart_dir)
    changed = [f for f in changed_files(chart_dir, base_ref) if packaged(f, patterns)]
    if not changed:
        return []
    current = parse_version(str(chart_meta(chart_dir)["version"]))
    try:
        before = parse_version(str((yaml.safe_load(old.stdout) or {}).get("version", "")))
    except ValueError:
        return []  # the base had no valid version: nothing to compare against
    if current > before:
        return []
    shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
    return [
        Finding(
            "version-bump",
            chart_yaml,
            version_line(chart_dir),
            f"version {current} is not higher than {before} at {base_ref}, but {shown} changed",
        )
    ]
