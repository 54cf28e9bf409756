"""Chart versioning: semver precedence, the bump rule against a git ref, CHANGELOG and Artifact Hub checks."""

from __future__ import annotations

import itertools
import subprocess
import textwrap
from pathlib import Path

import pytest

from kvtier import paths
from kvtier.errors import UserError
from kvtier.publish import changelog, versioning
from kvtier.publish.versioning import changed_without_bump, packaged, parse_version


def test_semver_precedence_follows_the_spec_example() -> None:
    # semver.org section 11: 1.0.0-alpha < alpha.1 < alpha.beta < beta < beta.2 < beta.11 < rc.1 < 1.0.0
    chain = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2"]
    chain += ["1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "2.0.0"]
    parsed = [parse_version(v) for v in chain]
    assert parsed == sorted(reversed(parsed))
    assert all(a < b for a, b in itertools.pairwise(parsed))
    assert parse_version("1.2.3+build.5") == parse_version("1.2.3"), "build metadata has no precedence"
    assert str(parse_version("1.2.3-rc.1+b")) == "1.2.3-rc.1+b"


@pytest.mark.parametrize("bad", ["1.2", "v1.2.3", "01.2.3", "1.2.3-", "1.2.3-01", "latest", ""])
def test_semver_rejects_non_versions(bad: str) -> None:
    with pytest.raises(ValueError, match="not a semantic version"):
        parse_version(bad)


@pytest.mark.parametrize(
    ("path", "patterns", "expected"),
    [
        ("templates/a.yaml", ["tests/", "ci/"], True),
        ("tests/a_test.yaml", ["tests/", "ci/"], False),
        ("ci/x-values.yaml", ["tests/", "ci/"], False),
        ("notes.bak", ["*.bak"], False),
        ("sub/deep/file.orig", ["*.orig"], False),
        ("README.md.gotmpl", ["*.gotmpl"], False),
        ("templates/tests/hook.yaml", ["/tests/"], True),
        ("tests/suite_test.yaml", ["/tests/"], False),
        ("templates/.hidden.yaml", [], False),
        ("a/b.txt", ["*.txt"], False),
        ("a/b.txt", ["/*.txt"], True),
        ("top.txt", ["/*.txt"], False),
        ("keep.bak", ["!keep.bak"], True),
        ("other.yaml", ["!keep.bak"], False),
    ],
)
def test_helmignore_patterns(path: str, patterns: list[str], expected: bool) -> None:
    assert packaged(path, patterns) is expected


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A throwaway git repo with one chart at 0.1.0 committed as `base`."""
    chart = tmp_path / "charts" / "demo"
    (chart / "templates").mkdir(parents=True)
    (chart / "tests").mkdir()
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: demo\nversion: 0.1.0\n")
    (chart / ".helmignore").write_text("# test suites stay out of the package\ntests/\n")
    (chart / "templates" / "cm.yaml").write_text("kind: ConfigMap\n")
    (chart / "tests" / "cm_test.yaml").write_text("suite: cm\n")
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    _git(tmp_path, "tag", "base")
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    return chart


def test_unchanged_chart_has_no_finding(repo: Path) -> None:
    assert changed_without_bump(repo, "base") == []


def test_changed_template_without_bump_is_a_finding(repo: Path) -> None:
    (repo / "templates" / "cm.yaml").write_text("kind: ConfigMap\ndata: {a: b}\n")
    findings = changed_without_bump(repo, "base")
    assert [f.rule for f in findings] == ["version-bump"]
    assert findings[0].line == 3, "points at the version line of Chart.yaml"
    assert "templates/cm.yaml" in findings[0].message and "0.1.0" in findings[0].message
    assert "CHANGELOG" in str(findings[0])


def test_new_untracked_template_counts_as_a_change(repo: Path) -> None:
    (repo / "templates" / "svc.yaml").write_text("kind: Service\n")
    assert [f.rule for f in changed_without_bump(repo, "base")] == ["version-bump"]


def test_bumped_chart_passes(repo: Path) -> None:
    (repo / "templates" / "cm.yaml").write_text("kind: ConfigMap\ndata: {a: b}\n")
    (repo / "Chart.yaml").write_text("apiVersion: v2\nname: demo\nversion: 0.1.1\n")
    assert changed_without_bump(repo, "base") == []


def test_version_going_down_is_a_finding(repo: Path) -> None:
    (repo / "Chart.yaml").write_text("apiVersion: v2\nname: demo\nversion: 0.1.0-rc.1\n")
    assert [f.rule for f in changed_without_bump(repo, "base")] == ["version-bump"]


def test_change_outside_the_package_needs_no_bump(repo: Path) -> None:
    (repo / "tests" / "cm_test.yaml").write_text("suite: cm changed\n")
    assert changed_without_bump(repo, "base") == []


def test_committed_change_is_compared_with_the_ref_not_head(repo: Path) -> None:
    (repo / "templates" / "cm.yaml").write_text("kind: ConfigMap\ndata: {x: y}\n")
    _git(repo.parents[1], "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "change")
    assert [f.rule for f in changed_without_bump(repo, "base")] == ["version-bump"]
    assert changed_without_bump(repo, "HEAD") == []


def test_chart_new_since_the_ref_needs_no_bump(repo: Path) -> None:
    other = repo.parent / "other"
    (other / "templates").mkdir(parents=True)
    (other / "Chart.yaml").write_text("apiVersion: v2\nname: other\nversion: 0.1.0\n")
    assert changed_without_bump(other, "base") == []


def test_invalid_version_is_reported_not_raised(repo: Path) -> None:
    (repo / "Chart.yaml").write_text("apiVersion: v2\nname: demo\nversion: one\n")
    assert [f.rule for f in changed_without_bump(repo, "base")] == ["version-semver"]


def test_unknown_ref_is_a_user_error(repo: Path) -> None:
    with pytest.raises(UserError, match="git fetch"):
        changed_without_bump(repo, "origin/does-not-exist")


CHART_YAML = """\
apiVersion: v2
name: demo
version: 0.2.0
annotations:
  artifacthub.io/license: Apache-2.0
  artifacthub.io/links: |
    - name: source
      url: https://example.org/demo
  artifacthub.io/images: |
    - name: app
      image: ghcr.io/example/app:v1.2.3
  artifacthub.io/changes: |
    - kind: added
      description: A second thing, described over two lines.
    - kind: fixed
      description: A bug.
"""

CHANGELOG_MD = """\
# Changelog

## 0.2.0 - 2026-11-29

### Added

- A second thing, described
  over two lines.

### Fixed

- A bug.

## 0.1.0 - 2026-11-01

### Added

- First release.
"""


@pytest.fixture
def chart(tmp_path: Path) -> Path:
    (tmp_path / "Chart.yaml").write_text(CHART_YAML)
    (tmp_path / "CHANGELOG.md").write_text(CHANGELOG_MD)
    return tmp_path


def test_consistent_chart_has_no_release_finding(chart: Path) -> None:
    assert changelog.release_findings(chart) == []
    assert changelog.current_entries(chart) == [
        ("added", "A second thing, described over two lines."),
        ("fixed", "A bug."),
    ]


def test_missing_changelog_section_is_a_finding(chart: Path) -> None:
    (chart / "Chart.yaml").write_text(CHART_YAML.replace("0.2.0", "0.3.0"))
    rules = [f.rule for f in changelog.release_findings(chart)]
    assert "changelog-entry" in rules and "artifacthub-changes" in rules


def test_changelog_order_and_kind_headings_are_checked(chart: Path) -> None:
    text = CHANGELOG_MD.replace("## 0.1.0 - 2026-11-01", "## 0.3.0 - 2026-11-01").replace(
        "### Fixed", "### Bugs"
    )
    (chart / "CHANGELOG.md").write_text(text)
    messages = [f.message for f in changelog.changelog_findings(chart)]
    assert any("newest first" in m for m in messages)
    assert any("'### Bugs'" in m for m in messages)


def test_annotation_that_disagrees_with_the_changelog_is_a_finding(chart: Path) -> None:
    (chart / "Chart.yaml").write_text(CHART_YAML.replace("description: A bug.", "description: Another bug."))
    findings = changelog.annotation_findings(chart)
    assert [f.rule for f in findings] == ["artifacthub-changes"]
    assert findings[0].line == 12, "points at the annotation's line"


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        ("ghcr.io/example/app:v1.2.3", "ghcr.io/example/app", "pinned tag"),
        ("ghcr.io/example/app:v1.2.3", "ghcr.io/example/app:latest", "pinned tag"),
        ("artifacthub.io/license: Apache-2.0", "artifacthub.io/license: Apache 2", "SPDX"),
        ("url: https://example.org/demo", "url: http://example.org/demo", "https"),
    ],
)
def test_malformed_annotations_are_findings(chart: Path, old: str, new: str, needle: str) -> None:
    (chart / "Chart.yaml").write_text(CHART_YAML.replace(old, new))
    findings = changelog.annotation_findings(chart)
    assert [f.rule for f in findings] == ["artifacthub-annotation"]
    assert needle in findings[0].message, findings[0].message


def test_digest_pinned_image_is_accepted(chart: Path) -> None:
    digest = "ghcr.io/example/app@sha256:" + "a" * 64
    (chart / "Chart.yaml").write_text(CHART_YAML.replace("ghcr.io/example/app:v1.2.3", digest))
    assert changelog.annotation_findings(chart) == []


@pytest.mark.parametrize("name", ["curvine", "kv-tiered-inference"])
def test_real_chart_is_ready_to_publish(name: str) -> None:
    chart = paths.CHARTS / name
    assert (chart / "Chart.yaml").is_file(), f"charts/{name}/Chart.yaml is missing"
    findings = changelog.release_findings(chart)
    assert not findings, "\n".join(map(str, findings))


def test_rules_are_declared_once_with_reason_and_remedy() -> None:
    assert all(r.id == key and r.reason and r.remedy for key, r in versioning.RULES.items())


def test_changelog_parser_reports_entry_outside_a_kind() -> None:
    text = textwrap.dedent(
        """\
        ## 1.0.0 - 2026-01-01
        - stray entry
        """
    )
    _, problems = changelog.parse(text)
    assert problems == [(2, "entry outside a `### <Kind>` heading")]
