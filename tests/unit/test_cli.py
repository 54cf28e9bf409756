"""The `kvtier` entry point: help, version, and argument errors as exit codes, not tracebacks."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kvtier import __version__, cli, exitcodes, paths


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kvtier.cli", *args], capture_output=True, text=True, timeout=60
    )


def test_version_prints_package_version() -> None:
    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"kvtier {__version__}"


def test_help_lists_every_registered_command() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    parser = cli.build_parser()
    subcommands = next(a for a in parser._actions if a.dest == "command").choices
    assert "generate" in subcommands
    for name in subcommands:
        assert name in result.stdout


def test_no_command_prints_help_and_exits_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == exitcodes.USAGE
    assert "usage: kvtier" in capsys.readouterr().out


def test_unknown_command_is_a_usage_error_without_traceback() -> None:
    result = run_cli("no-such-command")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr
    assert "Traceback" not in result.stderr


def test_only_the_chosen_command_module_is_imported() -> None:
    probe = (
        "import sys; from kvtier import cli; cli.build_parser(only='generate'); "
        "print(sorted(m for m in sys.modules if m.startswith('kvtier.commands.')))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['kvtier.commands.generate']"


def test_a_reader_that_goes_away_ends_the_run_quietly() -> None:
    """`kvtier validate --output json | head -1`: exit 141 like Unix tools, no traceback."""
    command = [sys.executable, "-m", "kvtier.cli", "validate", "--no-render", "--output", "json", "values/"]
    with subprocess.Popen(
        command, cwd=paths.ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # the reader is gone before the report is written
        error = process.stderr.read()
    assert process.returncode == 141, error
    assert "Traceback" not in error
