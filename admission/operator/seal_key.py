"""The key of the PodGroup record seal (`admission.core.quota.seal`): a Secret in draq's namespace that only
draq reads. The first start creates it; that start also adopts the records written before sealing existed."""

from __future__ import annotations

import base64
import logging
import secrets
from dataclasses import dataclass

from admission.core.errors import DraqError
from admission.core.quota import SEAL_KEY_BYTES
from admission.kube import kinds
from admission.kube.client import Client, KubeApiError

log = logging.getLogger(__name__)
KEY_FIELD = "key"


@dataclass(frozen=True, slots=True)
class SealKey:
    key: bytes
    created: bool  # made by this start: the records found now are adopted (sealed as they stand)


async def load_seal_key(api: Client, namespace: str, name: str) -> SealKey:
    """Read the key from Secret `namespace/name`, creating it with a random key when it does not exist."""
    path = kinds.SECRETS.object_path(namespace, name)
    try:
        return SealKey(_key_of(await api.get(path), namespace, name), created=False)
    except KubeApiError as err:
        if err.status != 404:
            raise
    key = secrets.token_bytes(SEAL_KEY_BYTES)
    body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "draq"}},
            "data": {KEY_FIELD: base64.b64encode(key).decode()}}
    try:
        await api.create(kinds.SECRETS.collection_path(namespace), body)
    except KubeApiError as err:
        if err.status != 409:
            raise
        return SealKey(_key_of(await api.get(path), namespace, name), created=False)  # another replica was first
    log.info("created the PodGroup seal key in Secret %s/%s; records written before sealing are adopted once",
             namespace, name)
    return SealKey(key, created=True)


def _key_of(secret: dict[str, object], namespace: str, name: str) -> bytes:
    data = secret.get("data")
    encoded = data.get(KEY_FIELD) if isinstance(data, dict) else None
    try:
        key = base64.b64decode(str(encoded), validate=True) if encoded else b""
    except ValueError:
        key = b""
    if len(key) < SEAL_KEY_BYTES:
        raise DraqError(f"Secret {namespace}/{name}, field data.{KEY_FIELD}: expected a base64 key of at least "
                        f"{SEAL_KEY_BYTES} bytes; delete the Secret and draq creates a new one (its PodGroup records "
                        "are then adopted again on that start)")
    return key
