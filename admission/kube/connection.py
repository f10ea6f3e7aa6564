"""The connection details of `Credentials`, for a client other than `KubeApi` (kopf's login handler): the
same kubeconfig, context or in-cluster account, so every part of `draq run` talks to the API as one user;
and the context's namespace, for commands that take one."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kubernetes import config as k8s_config

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


def context_namespace(kubeconfig: Path | None = None, context: str | None = None) -> str:
    """The namespace of the kubeconfig's context (as kubectl takes it when no -n is given), else `default`."""
    try:
        contexts, active = k8s_config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
            str(kubeconfig) if kubeconfig else None)
    except (k8s_config.ConfigException, OSError):
        return "default"  # no kubeconfig (in cluster): the credentials' own loader says what is wrong
    chosen = next((c for c in contexts or [] if c.get("name") == context), None) if context else active
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    return namespace if isinstance(namespace, str) and namespace else "default"
