"""Credentials from a kubeconfig reach the requests draq makes: tokens become an Authorization header."""

from __future__ import annotations

from pathlib import Path

import yaml

from admission.kube.client import load_credentials


def write_kubeconfig(path: Path, user: dict[str, str]) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:6443", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    }))
    return path


def test_service_account_token_is_sent_as_a_bearer_header(tmp_path: Path) -> None:
    credentials = load_credentials(write_kubeconfig(tmp_path / "config", {"token": "abc.def"}))
    assert credentials.headers() == {"Authorization": "Bearer abc.def"}
    assert credentials.host == "https://127.0.0.1:6443"


def test_no_token_means_no_authorization_header(tmp_path: Path) -> None:
    credentials = load_credentials(write_kubeconfig(tmp_path / "config", {}))
    assert credentials.headers() == {}
