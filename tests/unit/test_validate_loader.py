"""The values loader: positions for every key, and a clear error (never a traceback) for bad files."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtier.cli import main
from kvtier.errors import UserError
from kvtier.validate.inputs import loader

FIXTURES = Path(__file__).parents[1] / "fixtures" / "values"


def test_positions_of_keys_and_items() -> None:
    loaded = loader.load(FIXTURES / "good-minimal.yaml")
    assert loaded.where(("cache", "chunkSize")) == (4, 3)
    assert loaded.where(("models", 0, "name")) == (20, 5)
    # a key that is not in the file: its nearest ancestor
    assert loaded.where(("cache", "l1", "nope")) == loaded.where(("cache", "l1"))


def test_timestamps_stay_strings_as_in_helm(tmp_path: Path) -> None:
    path = tmp_path / "v.yaml"
    path.write_text("date: 2024-01-01\n")
    assert loader.load(path).data == {"date": "2024-01-01"}


def test_merge_keys_are_resolved(tmp_path: Path) -> None:
    path = tmp_path / "v.yaml"
    path.write_text("base: &b {x: 1, z: 2}\nother:\n  <<: *b\n  z: 3\n")
    assert loader.load(path).data["other"] == {"x": 1, "z": 3}


@pytest.mark.parametrize(
    ("name", "pattern"),
    [
        (
            "bad-duplicate-key.yaml",
            r"bad-duplicate-key.yaml:3:3: duplicate key 'chunkSize' \(first defined on line 2\)",
        ),
        ("bad-tab.yaml", r"bad-tab.yaml:2:1: malformed YAML: .*tab"),
        ("bad-malformed.yaml", r"bad-malformed.yaml:2:1: malformed YAML"),
        ("bad-empty.yaml", r"bad-empty.yaml: empty file"),
        ("bad-binary.yaml", r"bad-binary.yaml: binary file"),
        ("bad-top-level-list.yaml", r"bad-top-level-list.yaml:1:1: the top level must be a mapping"),
    ],
)
def test_bad_files_are_user_errors_with_position(name: str, pattern: str) -> None:
    with pytest.raises(UserError, match=pattern):
        loader.load(FIXTURES / name)


def test_huge_file_is_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text("a: " + "x" * (loader.MAX_BYTES + 1))
    with pytest.raises(UserError, match="too large"):
        loader.load(path)


def test_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join(f'*a{i - 1}' for _ in range(10))}]" for i in range(1, 8)]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(UserError, match="alias bomb"):
        loader.load(path)


def test_not_utf8_and_multiple_documents(tmp_path: Path) -> None:
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(UserError, match="not UTF-8"):
        loader.load(latin)
    docs = tmp_path / "docs.yaml"
    docs.write_text("a: 1\n---\nb: 2\n")
    with pytest.raises(UserError, match=r"docs.yaml:3: more than one YAML document"):
        loader.load(docs)


def test_non_scalar_key(tmp_path: Path) -> None:
    path = tmp_path / "v.yaml"
    path.write_text("? [a, b]\n: 1\n")
    with pytest.raises(UserError, match=r"v.yaml:1:3: a key must be a plain scalar"):
        loader.load(path)


@pytest.mark.parametrize(
    "name",
    [f"bad-{n}.yaml" for n in ("binary", "duplicate-key", "empty", "malformed", "tab", "top-level-list")],
)
def test_cli_exit_2_and_no_traceback(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--no-render", str(FIXTURES / name)]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    assert name in captured.out


def test_cli_missing_path_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path / "nope.yaml")]) == 2
    assert "no such file" in capsys.readouterr().err
