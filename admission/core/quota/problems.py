"""Why a pod group cannot be charged. Never silently free: an unknown shape stops admission."""

from __future__ import annotations

from admission.core.errors import DraqError


class Unchargeable(DraqError):
    """The group's charge cannot be computed; the message names the claim, request and reason.

    `permanent` is true for shapes draq does not understand (fix the claim or the unit), false for
    charges that depend on devices or a plan not known yet (may resolve by itself).
    """

    def __init__(self, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.permanent = permanent
