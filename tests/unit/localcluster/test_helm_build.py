"""Building Helm from the Go module proxy: the stamps Helm's own Makefile sets, the cache layout, and a
cached binary reused without a Go toolchain."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from admission.localcluster import helm
from admission.localcluster.build import BuildError

GO_MOD = """module helm.sh/helm/v3

go 1.24.0

require (
\tgithub.com/spf13/cobra v1.10.1
\tk8s.io/client-go v0.34.2
)
"""


def test_the_kubernetes_version_comes_from_client_go() -> None:
    assert helm.kubernetes_minor(GO_MOD) == 34
    with pytest.raises(BuildError, match="client-go"):
        helm.kubernetes_minor("module x\n")


def test_ldflags_stamp_the_version_and_the_kubernetes_release_like_helms_makefile() -> None:
    flags = helm.ldflags("v3.19.5", 34)
    assert "-X helm.sh/helm/v3/internal/version.version=v3.19.5" in flags
    for package in ("pkg/chartutil", "pkg/lint/rules"):
        assert f"-X helm.sh/helm/v3/{package}.k8sVersionMajor=1" in flags
        assert f"-X helm.sh/helm/v3/{package}.k8sVersionMinor=34" in flags
    assert flags.startswith("-s -w")


def test_the_binary_is_cached_per_version_beside_the_control_plane(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAQ_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("DRAQ_HELM_VERSION", raising=False)
    paths = helm.paths_for()
    assert paths.binary == tmp_path / "helm" / helm.HELM_VERSION / "helm"
    assert paths.log_dir == tmp_path / "build" / f"helm-{helm.HELM_VERSION}" / "logs"


def test_a_cached_binary_is_reused_without_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAQ_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "no-go-here"))
    binary = helm.paths_for("v3.19.5").binary
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    os.chmod(binary, 0o755)
    assert helm.build("v3.19.5").binary == binary
    with pytest.raises(BuildError, match="Go toolchain"):
        helm.build("v3.19.4")


def test_a_version_that_is_not_helm_3_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAQ_CACHE_DIR", str(tmp_path))
    with pytest.raises(BuildError, match="not of the form"):
        helm.build("latest")
