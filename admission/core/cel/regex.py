"""Regular expressions for `matches`, `find` and `findAll`, run by RE2 as in Kubernetes.

RE2 matches in time linear in the input, so a hostile pattern in a selector or a QuotaUnit cannot
stall the webhook or the operator (Python's backtracking `re` could, e.g. `(a+)+$`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import re2

from admission.core.cel.errors import CelRuntimeError

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # errors are reported to the caller, not printed by the library


@lru_cache(maxsize=1024)
def _compile(pattern: str) -> Any:
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except re2.error as error:
        reason = error.args[0].decode() if error.args and isinstance(error.args[0], bytes) else str(error)
        return CelRuntimeError(f"invalid regular expression {pattern!r}: {reason}")


def compiled(pattern: str) -> Any:
    """The compiled pattern (with `search` and `finditer`); an invalid one raises CelRuntimeError."""
    result = _compile(pattern)
    if isinstance(result, CelRuntimeError):
        raise CelRuntimeError(str(result))
    return result
