"""Errors the core raises for unusable input. Every message names the object, the field and the reason."""

from __future__ import annotations


class DraqError(Exception):
    """Base class of every error draq reports to a user instead of a traceback."""


class InvalidInput(DraqError):
    """A manifest or argument that cannot be used: names the object, the field and why."""

    def __init__(self, obj: str, field: str, reason: str) -> None:
        self.obj = obj
        self.field = field
        self.reason = reason
        where = f"{obj}, field {field}" if field else obj
        super().__init__(f"{where}: {reason}")
