"""Reading a file the user named: one clear UserError for each way it can be unusable.

A FIFO or a device would block a plain read forever (and root reads mode-000 files anyway), so only
regular files are read; their size is checked before reading, and text must be UTF-8.
"""

from __future__ import annotations

import stat
from pathlib import Path

from kvtier.errors import UserError

MAX_BYTES = 8 * 2**20  # larger than any config this toolkit reads: a log, a binary or a dump


def regular_file(path: Path, what: str) -> Path:
    """`path` itself, when it is a regular file; else a UserError saying what it is instead."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise UserError(f"{path}: no such file (expected a {what})") from None
    except OSError as error:
        raise UserError(f"{path}: cannot read ({error.strerror or error}; expected a {what})") from None
    if stat.S_ISDIR(mode):
        raise UserError(f"{path}: is a directory (expected a {what})")
    if not stat.S_ISREG(mode):
        raise UserError(f"{path}: not a regular file (a FIFO, socket or device; expected a {what})")
    return path


def read_bytes(path: Path, what: str, limit: int = MAX_BYTES) -> bytes:
    regular_file(path, what)
    try:
        size = path.stat().st_size
        if size > limit:
            raise UserError(f"{path}: {size} bytes is too large for a {what} (limit {limit})")
        return path.read_bytes()
    except OSError as error:
        raise UserError(f"{path}: cannot read ({error.strerror or error}; expected a {what})") from None


def read_text(path: Path, what: str, limit: int = MAX_BYTES) -> str:
    raw = read_bytes(path, what, limit)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise UserError(f"{path}: not UTF-8 text (byte {error.start}); expected a {what}") from None
