"""The serving TLS context, whose certificate can be swapped while the server runs.

`ssl.SSLContext.load_cert_chain` on a live context changes the certificate for every handshake
that follows; connections already open keep theirs. So a renewal drops no request: there is one
context for the server's lifetime, and new chains are loaded into it. With a client CA the same context
verifies the API server's client certificate (mTLS).
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import tempfile
from pathlib import Path

from admission.core.errors import DraqError
from admission.webhook.certificates import KeyPair, load_pair

log = logging.getLogger(__name__)


class ServingTLS:
    """One server-side SSL context and the key pair it currently serves."""

    def __init__(self) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.context.set_alpn_protocols(["http/1.1"])
        self.current: KeyPair | None = None
        self._dir = tempfile.TemporaryDirectory(prefix="draq-tls-")
        os.chmod(self._dir.name, 0o700)

    def install(self, pair: KeyPair) -> None:
        """Serve `pair` from the next handshake on (load_cert_chain only reads files)."""
        cert, key = Path(self._dir.name, "tls.crt"), Path(self._dir.name, "tls.key")
        key.touch(mode=0o600)
        key.write_bytes(pair.key_pem)
        cert.write_bytes(pair.cert_pem)
        self.context.load_cert_chain(cert, key)
        self.current = pair
        log.info("serving certificate until %s", pair.not_after.isoformat())

    def require_client_certificates(self, ca_file: Path) -> None:
        """mTLS: a handshake succeeds only with a client certificate signed by a CA in `ca_file` (PEM)."""
        try:
            self.context.load_verify_locations(cafile=ca_file)
        except (OSError, ssl.SSLError) as err:
            raise DraqError(f"client CA file {ca_file}: {getattr(err, 'strerror', None) or err}; give a PEM "
                            "bundle of the CA that signed the API server's client certificate") from err
        self.context.verify_mode = ssl.CERT_REQUIRED
        log.info("requiring client certificates signed by a CA in %s", ca_file)

    def close(self) -> None:
        self._dir.cleanup()


class CertFileWatcher:
    """Serves externally provided files (e.g. a cert-manager Secret mount) and reloads them on change.

    A half-written or mismatched pair is reported and skipped: the previous certificate stays.
    """

    def __init__(self, tls: ServingTLS, cert_file: Path, key_file: Path, interval: float = 10.0) -> None:
        self._tls = tls
        self._cert_file = cert_file
        self._key_file = key_file
        self._interval = interval
        self._seen: tuple[bytes, bytes] | None = None

    def load(self) -> bool:
        """Install the files if their content changed; True if it did. Raises DraqError if unusable."""
        try:
            content = (self._cert_file.read_bytes(), self._key_file.read_bytes())
        except OSError as err:
            raise DraqError(f"certificate files {self._cert_file}, {self._key_file}: {err.strerror}") from err
        if content == self._seen:
            return False
        pair = load_pair(*content, source=f"certificate file {self._cert_file}")
        self._tls.install(pair)
        self._seen = content
        return True

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                if self.load():
                    log.info("reloaded certificate from %s", self._cert_file)
            except DraqError as err:
                log.warning("keeping the current certificate: %s", err)
