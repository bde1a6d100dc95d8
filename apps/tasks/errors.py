"""The one application error of agentkit's Django apps (STYLE.md): no imports, so every layer
(specs, tasks, evolution) can raise it."""

from __future__ import annotations


class ApplicationError(Exception):
    """An error a user can act on; translated at each edge (400 JSON, error frame, CommandError)."""

    def __init__(self, message: str, extra: dict | None = None):
        super().__init__(message)
        self.message = message
        self.extra = extra or {}
