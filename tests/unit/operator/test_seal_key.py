"""The record seal's key: created once in draq's namespace, read by every later start, refused when unusable."""

from __future__ import annotations

import asyncio
import base64

import pytest

from admission.core.errors import DraqError
from admission.operator.seal_key import load_seal_key
from tests.support.fake_api import FakeApi


def test_the_first_start_creates_the_key_and_later_starts_read_it() -> None:
    api = FakeApi()
    first = asyncio.run(load_seal_key(api, "draq-system", "draq-seal-key"))
    again = asyncio.run(load_seal_key(api, "draq-system", "draq-seal-key"))
    assert first.created and not again.created and first.key == again.key and len(first.key) == 32
    secret = api.get_object("Secret", "draq-system", "draq-seal-key")
    assert secret is not None and base64.b64decode(secret["data"]["key"]) == first.key


def test_a_key_too_short_is_refused_naming_the_secret_and_the_fix() -> None:
    api = FakeApi()
    api.add({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "draq-seal-key", "namespace": "draq-system"},
             "data": {"key": base64.b64encode(b"short").decode()}})
    with pytest.raises(DraqError, match=r"Secret draq-system/draq-seal-key, field data.key: expected a base64 key of "
                                        r"at least 32 bytes; delete the Secret and draq creates a new one"):
        asyncio.run(load_seal_key(api, "draq-system", "draq-seal-key"))
