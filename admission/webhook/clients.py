"""Client authentication of the webhook's callers by bearer token (mTLS is the TLS context's: `tls.ServingTLS`).

The API server sends a token when its admission configuration gives it a kubeconfig with one for draq's
webhook (docs/install.md, "Client authentication"). The accepted tokens are the non-empty lines of a file,
read again when it changes, so a token is rotated by adding the new line, moving the API server to it and
removing the old one.
"""

from __future__ import annotations

import hmac
import logging
import time
from pathlib import Path

from admission.core.errors import DraqError

log = logging.getLogger(__name__)


def read_tokens(path: Path) -> tuple[bytes, ...]:
    """The tokens in `path`, one a line; raises DraqError if there are none or the file cannot be read."""
    try:
        lines = path.read_bytes().splitlines()
    except OSError as err:
        raise DraqError(f"client token file {path}: {err.strerror}") from err
    tokens = tuple(line.strip() for line in lines if line.strip())
    if not tokens:
        raise DraqError(f"client token file {path} holds no token: write one token a line")
    return tokens


class TokenFile:
    """A `handlers.ClientCheck` that accepts `Authorization: Bearer <token>` for any token in the file."""

    def __init__(self, path: Path, recheck_seconds: float = 5.0) -> None:
        self.path = path
        self._recheck_seconds = recheck_seconds
        self._tokens = read_tokens(path)
        self._stamp = self._file_stamp()
        self._checked = time.monotonic()

    def admits(self, authorization: str | None) -> bool:
        self._refresh()
        if authorization is None:
            return False
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return False
        given = token.strip().encode()
        # Every token is compared, in constant time, so the answer's timing tells nothing of which matched.
        return sum(hmac.compare_digest(given, known) for known in self._tokens) > 0

    def _refresh(self) -> None:
        now = time.monotonic()
        if now - self._checked < self._recheck_seconds:
            return
        self._checked = now
        stamp = self._file_stamp()
        if stamp == self._stamp:
            return
        try:
            self._tokens = read_tokens(self.path)
            self._stamp = stamp
            log.info("reloaded the client tokens from %s", self.path)
        except DraqError as err:
            log.warning("keeping the current client tokens: %s", err)

    def _file_stamp(self) -> tuple[float, int]:
        try:
            stat = self.path.stat()
        except OSError:
            return (0.0, -1)
        return (stat.st_mtime, stat.st_size)
