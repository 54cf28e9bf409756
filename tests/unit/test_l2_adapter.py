"""The MultiProcess sealed adapter's module without LMCache (the toolkit has none): its classes are built
on first access, and the `--l2-adapter` it names is the one the chart renders
(tests/charts/test_hyperpod_render.py). Its I/O is l2_blocks' (tests/unit/test_l2_native.py); the adapter
itself runs on LMCache's own interface in tests/engine/test_hyperpod_l2_config.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtier.podscripts import l2_adapter, l2_blocks


def test_the_adapter_classes_are_built_on_first_access() -> None:
    for name in (l2_adapter.CLASS_NAME, l2_adapter.CONFIG_CLASS_NAME):
        assert name not in vars(l2_adapter)
        with pytest.raises(ImportError):  # no LMCache here, or one without its compute parts (no torch)
            getattr(l2_adapter, name)
    with pytest.raises(AttributeError):
        l2_adapter.NoSuchAdapter  # noqa: B018


def test_lmcaches_plugin_factory_finds_the_config_class_by_its_convention() -> None:
    # LMCache's plugin factory tries `<class_name>Config` in the module (plugin_l2_adapter.py, 0.5.5)
    assert l2_adapter.CONFIG_CLASS_NAME == l2_adapter.CLASS_NAME + "Config"
    argument = l2_adapter.adapter_argument("/l2/m.0123456789ab")
    assert argument["type"] == "plugin" and argument["class_name"] == l2_adapter.CLASS_NAME
    assert argument["module_path"] == l2_adapter.MODULE == Path(l2_adapter.__file__).stem


def test_a_store_says_whether_it_wrote(tmp_path: Path) -> None:
    """The adapter reports the bytes it wrote to LMCache: a chunk already there is not written again."""
    block = memoryview(bytearray(range(256)) * 16)
    final = str(tmp_path / "chunk.data")
    assert l2_blocks.store_block(final, "chunk.data", block, 0) is True
    assert l2_blocks.store_block(final, "chunk.data", memoryview(bytearray(4096)), 0) is False
    assert l2_blocks.load_block(final, "chunk.data", memoryview(bytearray(4096)), 0) is None


def test_a_writer_names_the_upstream_state_it_does_not_find() -> None:
    """Both sealed writers refuse to start on an upstream class that keeps its state elsewhere."""

    class Upstream:
        def __init__(self) -> None:
            self._loop = object()
            self._books: dict[int, int] = {}
            self._not_a_dict = [1]

    writer = Upstream()
    assert l2_blocks.missing_state(writer, ("_loop",), ("_books",)) == []
    assert l2_blocks.missing_state(writer, ("_loop", "_lock"), ("_books", "_not_a_dict", "_gone")) == [
        "_lock",
        "_not_a_dict",
        "_gone",
    ]
