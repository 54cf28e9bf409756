"""Every documented command runs as written: each `kvtier` and `make` command in the fenced shell blocks
of README.md and docs/*.md goes through the real argument parser (kvtier) or must name a Makefile target
(make); the ones that need nothing but local files (plan, validate --list-rules / --no-render) are run.

Usage lines keep their conventions: `<placeholder>`, `[optional flags]`, `CHART...` and a bare `...`
are read as sample values, so `kvtier cluster status [-o json]` is checked as `kvtier cluster status -o
json`. A documented command that uses an old spelling (one that warns) fails too.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from kvtier import cli, paths

FENCE = re.compile(r"^```(\w*)\s*$")
SHELLS = {"bash", "sh", "shell", "console"}
KVTIER = {"kvtier", ".venv/bin/kvtier"}
OPERATORS = {"&&", "||", ";", "|"}
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
TARGET = re.compile(r"^([A-Za-z0-9_.%/-]+(?:\s+[A-Za-z0-9_.%/-]+)*)\s*:(?!=)")


@dataclass(frozen=True)
class Command:
    where: str  # file:line
    argv: tuple[str, ...]  # without the program
    program: str  # "kvtier" or "make"


def doc_files() -> list[Path]:
    return [paths.ROOT / "README.md", *sorted((paths.ROOT / "docs").glob("*.md"))]


def shell_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, logical line) of every fenced shell block, continuations joined."""
    out: list[tuple[int, str]] = []
    inside, pending, start = False, "", 0
    for number, line in enumerate(text.splitlines(), 1):
        fence = FENCE.match(line.strip())
        if fence:
            inside = not inside and (fence.group(1) in SHELLS)
            pending = ""
            continue
        if not inside:
            continue
        start = start if pending else number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append((start, pending + line))
        pending = ""
    return out


def _sample(token: str) -> str:
    """A usage convention read as a sample value: <env> -> env, [--flag -> --flag, CHART... -> CHART."""
    token = re.sub(r"<([^<>]+)>", lambda m: re.sub(r"\W+", "-", m.group(1)).strip("-"), token)
    token = token.strip("[]")
    if token == "...":
        return "VALUE"
    return token[:-3] if token.endswith("...") and len(token) > 3 else token


def commands(path: Path, text: str | None = None) -> list[Command]:
    """The kvtier and make invocations in a markdown file (or in `text`, said to come from `path`)."""
    found = []
    for number, line in shell_lines(path.read_text() if text is None else text):
        tokens = shlex.split(line, comments=True)
        segment: list[str] = []
        for token in [*tokens, ";"]:
            if token not in OPERATORS:
                segment.append(token)
                continue
            while segment and ASSIGNMENT.match(segment[0]):  # FOO=bar kvtier ...
                segment.pop(0)
            if segment and segment[0] in (KVTIER | {"make"}):
                program = "make" if segment[0] == "make" else "kvtier"
                argv = tuple(_sample(t) for t in segment[1:] if t.strip("[]"))
                found.append(Command(f"{path.name}:{number}", argv, program))
            segment = []
    return found


def make_targets(makefile: Path) -> set[str]:
    targets: set[str] = set()
    for line in makefile.read_text().splitlines():
        match = TARGET.match(line)
        if match and not line.startswith("\t"):
            targets.update(t for t in match.group(1).split() if not t.startswith("."))
    return targets


def parse_problem(argv: tuple[str, ...]) -> str:
    """Why the real parser refuses `argv` (or warns about an old spelling); "" when it takes it."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            parsed = cli.build_parser().parse_args(list(argv))
        except SystemExit as stop:
            if stop.code:
                return err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else "exit"
            return ""  # --help, --version
    if "deprecated" in err.getvalue():
        return err.getvalue().strip()
    if not getattr(parsed, "func", None):
        return "no command"
    return ""


def make_problem(argv: tuple[str, ...], targets: set[str]) -> str:
    wanted = [a for a in argv if not a.startswith("-") and "=" not in a]
    missing = [t for t in wanted if t not in targets]
    if not wanted:
        return "no target (the default goal is not documented as such)"
    return f"no Makefile target {', '.join(missing)}" if missing else ""


def problems(found: list[Command]) -> list[str]:
    targets = make_targets(paths.ROOT / "Makefile")
    out = []
    for command in found:
        problem = (
            make_problem(command.argv, targets) if command.program == "make" else parse_problem(command.argv)
        )
        if problem:
            out.append(f"{command.where}: {command.program} {' '.join(command.argv)}: {problem}")
    return out


ALL = [c for path in doc_files() for c in commands(path)]


def test_the_docs_document_kvtier_and_make_commands() -> None:
    # A change that stopped the extraction from finding anything would pass every check below.
    programs = {c.program for c in ALL}
    assert programs == {"kvtier", "make"} and len(ALL) >= 40, len(ALL)
    assert {c.argv[0] for c in ALL if c.program == "kvtier"} >= {
        "validate",
        "plan",
        "preflight",
        "smoke",
        "bench",
        "cluster",
        "lint",
        "unittest-compare",
    }


def test_every_documented_command_parses() -> None:
    found = problems(ALL)
    assert found == [], "documented commands the CLI or the Makefile refuses:\n" + "\n".join(found)


def _runs_locally(command: Command) -> bool:
    """Needs nothing but local files: plan, validate --list-rules or --no-render, every file there."""
    argv = command.argv
    if command.program != "kvtier" or not argv:
        return False
    local = argv[0] == "plan" or (argv[0] == "validate" and {"--list-rules", "--no-render"} & set(argv))
    files = [a for a in argv if a.endswith((".yaml", ".json")) and not a.startswith("-")]
    return bool(local) and all((paths.ROOT / f).is_file() for f in files)


LOCAL = [c for c in ALL if _runs_locally(c)]


def test_some_documented_commands_run_here() -> None:
    assert len(LOCAL) >= 5, [c.argv for c in LOCAL]


@pytest.mark.parametrize("command", LOCAL, ids=[f"{c.where} {' '.join(c.argv)}" for c in LOCAL])
def test_local_documented_command_runs(
    command: Command, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(paths.ROOT)
    code = cli.main(list(command.argv))
    captured = capsys.readouterr()
    assert code == 0, f"{command.where}: exit {code}\n{captured.err[-2000:]}"
    assert captured.out.strip() and "Traceback" not in captured.err


def test_the_check_fails_on_a_command_that_no_longer_parses(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    text = "\n".join(
        [
            "```bash",
            "kvtier validate values/<env>.yaml --output json   # fine",
            "kvtier validate --kube-context prod                # an old spelling: warns",
            ".venv/bin/kvtier smoke --no-such-flag \\",
            "  --release kv",
            "make check && FOO=1 make no-such-target",
            "kvtier cluster status [-o yaml]",
            "```",
            "```text",
            "kvtier not-a-command   # not a shell block: not checked",
            "```",
        ]
    )
    found = problems(commands(doc, text))
    assert [line.split(":")[1] for line in found] == ["3", "4", "6", "7"], found
    assert "--kube-context is deprecated" in found[0]
    assert "unrecognized arguments: --no-such-flag" in found[1]
    assert "no Makefile target no-such-target" in found[2]
    assert "invalid choice: 'yaml'" in found[3]
