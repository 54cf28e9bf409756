"""The toolkit's import graph (built by grimp, the library behind import-linter): no circles, and the
CLI stays on top (no step imports `kvtier.commands` or `kvtier.cli`)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import grimp
import pytest

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("kvtier", cache_dir=None)


def circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Each import circle in the graph once, as the chain of modules that closes it.

    Imports inside functions count too: a lazy import is still a dependency, and hiding one in a
    function body is how circles usually survive."""
    found: dict[frozenset[str], list[str]] = {}
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back:
                members = frozenset(back)
                found.setdefault(members, [importer, *back])
    return list(found.values())


def test_no_import_circle_in_the_toolkit(graph: grimp.ImportGraph) -> None:
    found = circles(graph)
    assert found == [], "import circles (each closes on its first module):\n" + "\n".join(
        " -> ".join(chain) for chain in found
    )


def test_only_the_cli_imports_the_command_modules(graph: grimp.ImportGraph) -> None:
    top = {"kvtier.cli", "kvtier.commands", *graph.find_descendants("kvtier.commands")}
    wrong = sorted(
        f"{d['importer']} imports {d['imported']} (line {d['line_number']})"
        for d in graph.find_matching_direct_imports(import_expression="kvtier.** -> kvtier.commands.**")
        if d["importer"] not in top
    ) + sorted(
        f"{d['importer']} imports kvtier.cli (line {d['line_number']})"
        for d in graph.find_matching_direct_imports(import_expression="kvtier.** -> kvtier.cli")
        if d["importer"] not in top
    )
    assert wrong == [], "steps must not depend on the CLI layer:\n" + "\n".join(wrong)


def test_the_circle_check_finds_a_circle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The check itself can fail: a package with a registry that imports its registrants back, as
    # validate/rules.py did before catalogue.py, and a lazy import in a function body.
    pkg = tmp_path / "circled"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "registry.py").write_text("def all_rules():\n    from circled import rule_a\n    return rule_a\n")
    (pkg / "rule_a.py").write_text("from circled.registry import all_rules\n")
    (pkg / "plain.py").write_text(textwrap.dedent("import circled.registry\n"))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        found = circles(grimp.build_graph("circled", cache_dir=None))
    finally:
        sys.modules.pop("circled", None)
    assert [set(chain) for chain in found] == [{"circled.registry", "circled.rule_a"}]


def test_the_pytest_plugin_imports_nothing_of_the_toolkit() -> None:
    """pytest-helm-unittest is its own distribution: kvtier depends on it, never the other way round."""
    plugin = grimp.build_graph("pytest_helm_unittest", "kvtier", cache_dir=None)
    wrong = sorted(
        f"{d['importer']} imports {d['imported']} (line {d['line_number']})"
        for d in plugin.find_matching_direct_imports(import_expression="pytest_helm_unittest.** -> kvtier.**")
    ) + sorted(
        f"{d['importer']} imports {d['imported']} (line {d['line_number']})"
        for d in plugin.find_matching_direct_imports(import_expression="pytest_helm_unittest -> kvtier.**")
    )
    assert wrong == [], "\n".join(wrong)
    assert plugin.find_descendants("pytest_helm_unittest"), "the plugin package was not found"
