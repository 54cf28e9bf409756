"""README values tables come from values.yaml comments through the pinned helm-docs (kvtier.generate.readme).

The drift check itself is tests/unit/test_generated_files.py (kvtier generate --check covers the
READMEs); these tests show the generator is real: a comment change changes the table, a broken
template is an error, and every chart that publishes a README renders it from a template.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtier import paths
from kvtier.errors import UserError
from kvtier.generate import readme

TEMPLATE = """\
# {{ template "chart.name" . }}

| Key | Default | Description |
|-----|---------|-------------|
{{- range .Values }}
| `{{ .Key }}` | {{ .Default | default .AutoDefault }} | {{ .Description | default .AutoDescription }} |
{{- end }}
"""


@pytest.fixture
def chart(tmp_path: Path, need) -> Path:
    need((paths.TOOLS_BIN / "helm-docs").exists(), "pinned helm-docs not built (make tools)")
    chart = tmp_path / "demo"
    chart.mkdir()
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: demo\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("# -- How many pods run.\nreplicas: 2\n# -- Image tag.\ntag: v1\n")
    (chart / readme.TEMPLATE).write_text(TEMPLATE)
    return chart


def test_table_rows_come_from_values_comments(chart: Path) -> None:
    text = readme.render(chart)
    assert "| `replicas` | `2` | How many pods run. |" in text
    assert '| `tag` | `"v1"` | Image tag. |' in text
    assert text.index("`replicas`") < text.index("`tag`"), "rows keep values.yaml order"


def test_changed_comment_changes_the_readme(chart: Path) -> None:
    before = readme.render(chart)
    (chart / "values.yaml").write_text(
        "# -- How many engine pods run.\nreplicas: 2\n# -- Image tag.\ntag: v1\n"
    )
    after = readme.render(chart)
    assert before != after and "How many engine pods run." in after


def test_render_leaves_the_chart_untouched(chart: Path) -> None:
    readme.render(chart)
    assert not (chart / "README.md").exists(), "helm-docs ran on a copy"


def test_broken_template_is_an_error_not_a_silent_readme(chart: Path) -> None:
    (chart / readme.TEMPLATE).write_text('{{ template "no.such.template" . }}\n')
    with pytest.raises(UserError, match="helm-docs could not render"):
        readme.render(chart)


@pytest.mark.parametrize("name", ["curvine", "kv-tiered-inference"])
def test_chart_readme_is_generated_from_a_template(name: str, need) -> None:
    chart = paths.CHARTS / name
    need((paths.TOOLS_BIN / "helm-docs").exists(), "pinned helm-docs not built (make tools)")
    assert (chart / readme.TEMPLATE).is_file(), f"charts/{name}/{readme.TEMPLATE} is missing"
    text = readme.render(chart)
    assert "| Key | Type | Default | Description |" in text
    assert "## Upstream facts" in text, "the chart engineers' sections stay"
