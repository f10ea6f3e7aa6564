"""Regular expressions for `matches`, `find` and `findAll` (RE2 syntax, run by Python's `re`)."""

from __future__ import annotations

import re
from functools import lru_cache

from admission.core.cel.errors import CelRuntimeError


@lru_cache(maxsize=1024)
def compiled(pattern: str) -> re.Pattern[str]:
    try:
        # RE2's \z (end of text) is Python's \Z.
        return re.compile(pattern.replace(r"\z", r"\Z"))
    except re.error as error:
        raise CelRuntimeError(f"invalid regular expression {pattern!r}: {error}") from None
