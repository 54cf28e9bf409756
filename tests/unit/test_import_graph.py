"""The toolkit's import graph (built by grimp, the library behind import-linter): no circles, and the
CLI stays on top (no step imports `kvtier.commands` or `kvtier.cli`)."""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

import grimp
import pytest

import kvtier

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


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _dotted(node: ast.expr) -> list[str]:
    """`a.b.c` as ["a", "b", "c"]; [] for anything but names and attributes."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return [*head, node.attr] if head else []
    return []


def private_uses(root: Path, package: str) -> list[str]:
    """Each place a module of `package` (sources under `root`) reaches a private name (`_x`) of another of
    its modules: `from package.m import _x`, or `m._x` through an imported name. A private name is free to
    change with its own module alone; a caller elsewhere breaks silently, so it gets a public name."""
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        tree = ast.parse(path.read_text(), str(path))
        imported: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = parts[: len(parts) - node.level] if node.level else []
                source = ".".join([*base, *([node.module] if node.module else [])])
                if source.split(".")[0] != package:
                    continue
                for alias in node.names:
                    if _private(alias.name):
                        found.append(f"{module} imports {source}.{alias.name} (line {node.lineno})")
                    imported[alias.asname or alias.name] = f"{source}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == package:
                        bound = alias.asname or alias.name.split(".")[0]
                        imported[bound] = alias.name if alias.asname else package
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                chain = _dotted(node.value)
                if chain and chain[0] in imported:
                    owner = ".".join([imported[chain[0]], *chain[1:]])
                    found.append(f"{module} uses {owner}.{node.attr} (line {node.lineno})")
    return found


# Known uses left to the change that owns the file; each entry goes with its rename, and the test below says
# when one is gone. None today.
KNOWN_PRIVATE_USES: set[str] = set()


def test_no_module_uses_another_modules_private_names() -> None:
    found = {use.rsplit(" (line", 1)[0]: use for use in private_uses(Path(kvtier.__file__).parent, "kvtier")}
    new = [use for key, use in found.items() if key not in KNOWN_PRIVATE_USES]
    assert new == [], "private names used from another module (give them a public name):\n" + "\n".join(new)
    gone = sorted(KNOWN_PRIVATE_USES - found.keys())
    assert gone == [], "no longer found, remove from KNOWN_PRIVATE_USES:\n" + "\n".join(gone)


def test_the_private_use_check_finds_each_form(tmp_path: Path) -> None:
    pkg = tmp_path / "owner"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "lib.py").write_text("def _helper():\n    pass\n\n\ndef public():\n    _helper()\n")
    (pkg / "a.py").write_text("from owner.sub import lib\n\nlib._helper()\nlib.public()\n")
    (pkg / "b.py").write_text("from owner.sub.lib import _helper, public\n")
    (pkg / "sub" / "c.py").write_text("from . import lib\nimport owner.sub.lib\n\nowner.sub.lib._helper\n")
    assert private_uses(pkg, "owner") == [
        "owner.a uses owner.sub.lib._helper (line 3)",
        "owner.b imports owner.sub.lib._helper (line 1)",
        "owner.sub.c uses owner.sub.lib._helper (line 4)",
    ]
