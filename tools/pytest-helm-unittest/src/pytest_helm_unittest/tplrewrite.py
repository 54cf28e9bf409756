"""Rewrite calls inside Go template actions, for what `helm template` serves differently from helm-unittest.

`helm template` answers `lookup` with an empty map, always adds Helm's built-in API versions to
`.Capabilities.APIVersions` and refuses helm-unittest's default release name. The chart copy therefore
rewrites, inside `{{ ... }}` actions only (strings, raw strings and comments are left alone):

- `lookup A B C D` -> `(include "kvtier.lookup" (list A B C D) | fromJson)` (fakecluster answers it);
- `<chain>.Capabilities.APIVersions.Has X` -> `(has X (list <the test's API versions>))`, and
  `<chain>.Capabilities.APIVersions` otherwise -> `(list ...)` (helm-unittest serves only the test's list);
- `<chain>.Release.Name` -> the release name as a literal, when Helm renders under a stand-in name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# One lexical item inside an action; `word` covers identifiers, fields, variables and numbers.
_TOKEN = re.compile(
    r"""(?P<str>"(?:\\.|[^"\\\n])*")|(?P<raw>`[^`]*`)|(?P<chr>'(?:\\.|[^'\\\n])*')"""
    r"""|(?P<end>-?\s*\}\})|(?P<open>\()|(?P<close>\))|(?P<pipe>\|)"""
    r"""|(?P<word>[$.\w]+)|(?P<space>\s+)|(?P<other>.)""",
    re.S,
)
_COMMENT = re.compile(r"\{\{-?\s*/\*.*?\*/\s*-?\}\}", re.S)
_API_CHAIN = re.compile(r"^(?:\$\w*)?(?:\.\w+)*\.Capabilities\.APIVersions(?P<has>\.Has)?$")
_NAME_CHAIN = re.compile(r"^(?:\$\w*)?(?:\.\w+)*\.Release\.Name$")
TRIGGERS = ("lookup", "APIVersions", "Release.Name")


def go_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _command_end(tokens: list[tuple[str, str, int]], start: int) -> int:
    """Index of the token ending the command begun at `start`: a pipe, an unmatched `)`, the action's end."""
    depth = 0
    for i in range(start, len(tokens)):
        kind = tokens[i][0]
        if kind == "open":
            depth += 1
        elif kind == "close":
            if depth == 0:
                return i
            depth -= 1
        elif kind in ("pipe", "end") and depth == 0:
            return i
    return len(tokens)


def _wrap(args: str, form: str) -> str:
    """`form` around the arguments, keeping the whitespace around them (so line numbers stay)."""
    body = args.strip()
    start = args.index(body) if body else len(args)
    return args[:start] + form.format(body) + args[start + len(body) :]


def _rewrite_action(
    tokens: list[tuple[str, str, int]], apis: Sequence[str] | None, release_name: str | None, lookup: bool
) -> str:
    out: list[str] = []
    api_list = "(list " + " ".join(go_quote(a) for a in apis) + ")" if apis is not None else ""

    def args(start: int, end: int) -> str:  # a call's arguments, themselves rewritten
        return _rewrite_action(tokens[start:end], apis, release_name, lookup)

    i = 0
    while i < len(tokens):
        kind, text, _ = tokens[i]
        if kind == "word" and text == "lookup" and lookup:
            end = _command_end(tokens, i + 1)
            out.append(_wrap(args(i + 1, end), '(include "kvtier.lookup" (list {}) | fromJson)'))
            i = end
            continue
        match = _API_CHAIN.match(text) if kind == "word" and apis is not None else None
        if match and match.group("has"):
            end = _command_end(tokens, i + 1)
            out.append(_wrap(args(i + 1, end), "(has {} " + api_list + ")"))
            i = end
            continue
        if match:
            out.append(api_list)
        elif kind == "word" and release_name is not None and _NAME_CHAIN.match(text):
            out.append(go_quote(release_name))
        else:
            out.append(text)
        i += 1
    return "".join(out)


def rewrite(
    text: str, *, apis: Sequence[str] | None = None, release_name: str | None = None, lookup: bool = False
) -> str:
    """The template text with the requested rewrites (None / False: leave that one alone)."""
    if not any(t in text for t in TRIGGERS):
        return text
    out: list[str] = []
    pos = 0
    while True:
        start = text.find("{{", pos)
        if start < 0:
            out.append(text[pos:])
            return "".join(out)
        out.append(text[pos:start])
        comment = _COMMENT.match(text, start)
        if comment:
            out.append(comment.group(0))
            pos = comment.end()
            continue
        head = 3 if text.startswith("{{-", start) else 2
        tokens: list[tuple[str, str, int]] = []
        cursor = start + head
        while cursor < len(text):
            token = _TOKEN.match(text, cursor)
            if token is None:  # unreachable: `other` matches any character
                break
            assert token.lastgroup is not None
            tokens.append((token.lastgroup, token.group(0), cursor))
            cursor = token.end()
            if token.lastgroup == "end":
                break
        out.append(text[start : start + head] + _rewrite_action(tokens, apis, release_name, lookup))
        pos = cursor
