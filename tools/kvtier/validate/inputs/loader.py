"""YAML values files loaded with positions: every key path maps to its line and column.

PyYAML's compose step keeps a mark on every node; building the Python value ourselves from the
nodes lets us keep those marks and refuse duplicate keys (PyYAML silently keeps the last one, Helm's
parser refuses them). Scalars and keys are read as Helm reads them (kvtier.helmyaml: `y` is true, `1:20`
and timestamps are text, `.inf` is refused). Every problem with the file itself becomes a UserError
naming the file, line and column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kvtier import helmyaml, inputfiles
from kvtier.errors import UserError

MAX_BYTES = 2 * 2**20  # a values file larger than this is a mistake (a binary, a log, a dump)
MAX_NODES = 200_000  # guards against alias bombs ("billion laughs")
Loader = helmyaml.Loader
KeyPath = tuple[str | int, ...]


@dataclass
class Loaded:
    """A parsed file: its data and the (line, column), 1-based, of every key path."""

    path: Path
    data: Any
    marks: dict[KeyPath, tuple[int, int]] = field(default_factory=dict)  # where each key is written
    value_marks: dict[KeyPath, tuple[int, int]] = field(default_factory=dict)  # where each value starts

    def where(self, key_path: KeyPath, value: bool = False) -> tuple[int, int]:
        """Position of a path's key (or value), else of its nearest ancestor (a missing key: its parent)."""
        if value and key_path in self.value_marks:
            return self.value_marks[key_path]
        for end in range(len(key_path), -1, -1):
            if key_path[:end] in self.marks:
                return self.marks[key_path[:end]]
        return (1, 1)


def format_path(key_path: KeyPath) -> str:
    out = ""
    for part in key_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


class _Builder:
    def __init__(self, loaded: Loaded) -> None:
        self.loaded = loaded
        self.constructor = helmyaml.Loader("")
        self.count = 0

    def fail(self, node: yaml.Node, message: str) -> UserError:
        mark = node.start_mark
        return UserError(f"{self.loaded.path}:{mark.line + 1}:{mark.column + 1}: {message}")

    def build(self, node: yaml.Node, key_path: KeyPath) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            raise self.fail(node, f"more than {MAX_NODES} values (an alias bomb?); refusing to expand")
        mark = (node.start_mark.line + 1, node.start_mark.column + 1)
        self.loaded.marks.setdefault(key_path, mark)
        self.loaded.value_marks[key_path] = mark
        if isinstance(node, yaml.MappingNode):
            return self.mapping(node, key_path)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*key_path, i)) for i, item in enumerate(node.value)]
        try:
            value = self.constructor.construct_object(node)
        except yaml.YAMLError as error:
            raise self.fail(node, f"cannot read this value: {getattr(error, 'problem', error)}") from None
        if problem := helmyaml.json_problem(value):
            raise self.fail(node, problem)
        return helmyaml.json_number(value)

    def key(self, node: yaml.Node) -> Any:
        try:
            return self.constructor.construct_object(node)
        except yaml.YAMLError as error:
            raise self.fail(node, f"cannot read this key: {getattr(error, 'problem', error)}") from None

    def mapping(self, node: yaml.MappingNode, key_path: KeyPath) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                raise self.fail(key_node, "a key must be a plain scalar, not a list or mapping")
            key = self.key(key_node)
            identity = (type(key).__name__, key)  # go-yaml compares typed keys: 1, 1.0 and true differ
            if identity in seen:
                first = seen[identity].start_mark.line + 1
                message = f"duplicate key {key_node.value!r} (first defined on line {first}); keep one"
                raise self.fail(key_node, message)
            seen[identity] = key_node
        try:
            self.constructor.flatten_mapping(node)  # resolves `<<: *anchor` merges in place
        except yaml.YAMLError as error:
            raise self.fail(node, f"bad merge key: {getattr(error, 'problem', error)}") from None
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = helmyaml.key_text(self.key(key_node))
            if key is None:
                why = "it reads as null or a number past 64 bits"
                raise self.fail(key_node, f"Helm cannot use {key_node.value!r} as a key ({why}); quote it")
            child = (*key_path, key)
            self.loaded.marks[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            out[key] = self.build(value_node, child)
        return out


def read_text(path: Path) -> str:
    """The file's text, refusing what cannot be a values file (a directory, a FIFO, a huge file)."""
    return decode(inputfiles.read_bytes(path, "YAML values file", MAX_BYTES), path)


def decode(raw: bytes, path: Path) -> str:
    """Text of a values file's bytes: not too large, not binary, UTF-8, not empty."""
    if len(raw) > MAX_BYTES:
        raise UserError(f"{path}: {len(raw)} bytes is too large for a values file (limit {MAX_BYTES})")
    if b"\x00" in raw:
        raise UserError(f"{path}: binary file (contains NUL bytes); expected a YAML values file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise UserError(f"{path}: not UTF-8 text (byte {error.start}); expected a YAML values file") from None
    if not text.strip() or all(
        line.lstrip().startswith("#") or not line.strip() for line in text.splitlines()
    ):
        raise UserError(f"{path}: empty file; expected a mapping of values (see values/*.yaml)")
    return text


def _tab_hint(text: str, line: int) -> str:
    lines = text.splitlines()
    if (
        0 < line <= len(lines)
        and "\t" in lines[line - 1][: len(lines[line - 1]) - len(lines[line - 1].lstrip())]
    ):
        return " (a tab in the indentation: YAML indents with spaces only)"
    return ""


def load_text(text: str, path: Path) -> Loaded:
    loaded = Loaded(path=path, data=None)
    try:
        nodes = list(yaml.compose_all(text, Loader=Loader))
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = error.problem or error.context or "invalid YAML"
        if "\t" in problem or "'\\t'" in problem:
            problem = "a tab character where YAML needs spaces"
        raise UserError(f"{path}:{line}:{col}: malformed YAML: {problem}{_tab_hint(text, line)}") from None
    except yaml.YAMLError as error:
        raise UserError(f"{path}: malformed YAML: {error}") from None
    except RecursionError:
        raise UserError(f"{path}: nesting too deep to be a values file") from None
    nodes = [n for n in nodes if n is not None]
    if not nodes:
        raise UserError(f"{path}: empty file; expected a mapping of values")
    if len(nodes) > 1:
        mark = nodes[1].start_mark
        raise UserError(f"{path}:{mark.line + 1}: more than one YAML document (---); a values file holds one")
    root = nodes[0]
    if not isinstance(root, yaml.MappingNode):
        raise _Builder(loaded).fail(root, f"the top level must be a mapping of keys, found a {_kind(root)}")
    try:
        loaded.data = _Builder(loaded).build(root, ())
    except RecursionError:
        raise UserError(f"{path}: nesting too deep to be a values file") from None
    return loaded


def _kind(node: yaml.Node) -> str:
    return "list" if isinstance(node, yaml.SequenceNode) else f"scalar {node.value!r}"[:60]


def load(path: Path) -> Loaded:
    return load_text(read_text(path), path)


def load_bytes(raw: bytes, path: Path) -> Loaded:
    """A values document held in memory, with the same checks as a file."""
    return load_text(decode(raw, path), path)
