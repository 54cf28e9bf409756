"""`kvtier warm --rig --prefixes FILE`: the file in the values' shape (one model's map under
cache.warmup.prefixes) becomes the warm-up's prefixes, and every bad file is a UserError naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtier.errors import UserError
from kvtier.warmup import rig


def test_a_prefixes_file_in_the_values_shape_loads_and_null_removes(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "support:\n  text: You help.\nchat:\n  messages: [{role: system, content: Brief.}]\ngone: null\n"
    )
    loaded = rig.load(path)
    assert [(p.name, p.text, p.messages) for p in loaded] == [
        ("support", "You help.", None),
        ("chat", None, [{"role": "system", "content": "Brief."}]),
    ]


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"\xff\xfe\x00", "not UTF-8 text"),
        (b"a: [unclosed", "not YAML"),
        (b"- a\n- b\n", "expected a map of prefix name"),
        (b"a: just text\n", "a: expected a map with text, messages or file"),
        (b"a: null\n", "every prefix is null"),
        (b"a: {text: x, file: /f}\n", "exactly one of text, messages, file"),
    ],
)
def test_a_bad_prefixes_file_is_refused_with_its_name(tmp_path: Path, content: bytes, words: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_bytes(content)
    with pytest.raises(UserError) as raised:
        rig.load(path)
    assert str(path) in str(raised.value) and words in str(raised.value)
    with pytest.raises(UserError, match="No such file"):
        rig.load(tmp_path / "absent.yaml")
