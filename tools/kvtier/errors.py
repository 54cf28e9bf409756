"""Errors that are the user's to fix: printed as one clear message, never as a traceback."""

from __future__ import annotations


class UserError(Exception):
    """Bad input or environment. The message says what, where, and what to do instead."""
