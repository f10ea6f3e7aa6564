"""Facts about where the tests run."""

from __future__ import annotations

import os


def in_ci() -> bool:
    """CI services set CI (usually to "true"); randomized tests are derandomized there."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
