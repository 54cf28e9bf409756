"""Why the engine rig could not start or run: a message that says what to install or look at."""

from __future__ import annotations

from kvtier.errors import UserError


class RigError(UserError):
    """The rig's prerequisites or processes failed (missing venv, engine died, port busy)."""
