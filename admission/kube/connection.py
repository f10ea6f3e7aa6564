"""The connection details of `Credentials`, for a client other than `KubeApi` (kopf's login handler): the
same kubeconfig, context or in-cluster account, so every part of `draq run` talks to the API as one user."""

from __future__ import annotations

from dataclasses import dataclass

from admission.kube.client import Credentials


@dataclass(frozen=True, slots=True)
class Connection:
    server: str
    ca_path: str | None
    insecure: bool
    certificate_path: str | None
    private_key_path: str | None
    scheme: str | None  # e.g. "Bearer", with `token`
    token: str | None


def connection_of(credentials: Credentials) -> Connection:
    """A token is read afresh on every call (exec plugins and projected service account tokens rotate)."""
    configuration = credentials.configuration
    scheme, token = _authorization(credentials.headers().get("Authorization", ""))
    return Connection(server=credentials.host, ca_path=configuration.ssl_ca_cert or None,
                      insecure=not configuration.verify_ssl, certificate_path=configuration.cert_file or None,
                      private_key_path=configuration.key_file or None, scheme=scheme, token=token)


def _authorization(header: str) -> tuple[str | None, str | None]:
    scheme, _, token = header.strip().partition(" ")
    return (scheme, token.strip()) if scheme and token.strip() else (None, None)
