"""Regular expressions for `matches`, `find` and `findAll` (RE2 syntax, run by Python's `re`).

Python's engine backtracks where RE2 does not, so constructs RE2 rejects (backreferences,
lookaround, atomic groups, possessive quantifiers) are rejected here too rather than run.
"""

from __future__ import annotations

import re
from functools import lru_cache

from admission.core.cel.errors import CelRuntimeError

_NOT_RE2 = re.compile(r"\\[1-9]|\(\?(?:=|!|<=|<!|P=|>)|(?<!\\)[*+?}]\+")


@lru_cache(maxsize=1024)
def compiled(pattern: str) -> re.Pattern[str]:
    unsupported = _NOT_RE2.search(pattern)
    if unsupported:
        raise CelRuntimeError(f"invalid regular expression {pattern!r}: {unsupported.group()!r} is not RE2 syntax")
    try:
        # RE2's \z (end of text) is Python's \Z.
        return re.compile(pattern.replace(r"\z", r"\Z"))
    except re.error as error:
        raise CelRuntimeError(f"invalid regular expression {pattern!r}: {error}") from None
