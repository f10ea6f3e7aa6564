"""The control-plane build: version pinning, the wrapper module, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from admission.localcluster import build


def test_short_versions_resolve_to_pinned_patch_releases(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DRAQ_KUBERNETES_VERSION", raising=False)
    assert build.resolve_version("1.37") == build.DEFAULT_VERSION == build.resolve_version(None)
    assert build.resolve_version("1.35") == "v1.35.8"
    monkeypatch.setenv("DRAQ_KUBERNETES_VERSION", "1.36")
    assert build.resolve_version(None) == "v1.36.3"
    assert build.resolve_version("v1.34") == build.COMPAT_VERSION
    assert build.resolve_version("1.36.2") == "v1.36.2"


def test_malformed_version_is_refused_with_the_expected_form() -> None:
    with pytest.raises(build.BuildError, match=r"not of the form 1\.35 or v1\.35\.6"):
        build.resolve_version("latest")


def test_binaries_are_cached_per_version_outside_the_repository(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DRAQ_CACHE_DIR", str(tmp_path))
    paths = build.paths_for("1.34")
    assert paths.bin_dir == tmp_path / "kubernetes" / build.COMPAT_VERSION
    assert paths.binary("kube-apiserver").parent == paths.bin_dir
    assert not build.is_built(paths)


def test_missing_go_toolchain_says_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DRAQ_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(build.BuildError, match="Go toolchain was not found"):
        build.build("1.35")


def test_wrapper_module_replaces_every_staging_module_with_its_published_version(tmp_path: Path) -> None:
    build._write_wrapper(tmp_path, "v1.35.8", ["k8s.io/api", "k8s.io/client-go"])
    gomod = (tmp_path / "go.mod").read_text()
    assert "require k8s.io/kubernetes v1.35.8" in gomod
    assert "k8s.io/api => k8s.io/api v0.35.8" in gomod
    assert "k8s.io/client-go => k8s.io/client-go v0.35.8" in gomod
    assert 'k8s.io/kubernetes/cmd/kube-apiserver/app' in (tmp_path / "tools.go").read_text()


def test_version_stamp_reaches_component_base_and_client_go() -> None:
    flags = build._ldflags("v1.35.8")
    assert "-X k8s.io/component-base/version.gitVersion=v1.35.8" in flags
    assert "-X k8s.io/client-go/pkg/version.gitMinor=35" in flags


def test_the_build_commands_share_one_main(capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m admission.localcluster.build` and `... .helm`: a version option, --force, a print option;
    a failed build is one line on standard error and status 1."""
    asked: list[tuple[str | None, bool]] = []

    def fake(version: str | None, force: bool) -> Path:
        asked.append((version, force))
        if version == "bad":
            raise build.BuildError("no such release")
        return Path("/cache") / (version or "default")

    def main(*argv: str) -> int:
        return build.build_command(list(argv), "Build a thing.\n\nMore.", fake, ("--release", "which"),
                                   ("--print-where", "print it"), lambda path: path)

    assert main("--release", "v1", "--force", "--print-where") == 0
    assert main() == 0
    assert capsys.readouterr().out == "/cache/v1\n"
    assert main("--release", "bad") == 1
    assert capsys.readouterr().err == "error: no such release\n"
    assert asked == [("v1", True), (None, False), ("bad", False)]


def test_the_current_releases_resolve_to_their_pinned_patch_releases() -> None:
    assert build.resolve_version("1.37") == "v1.37.2"
    assert build.resolve_version("v1.36") == "v1.36.3"


def test_a_go_older_than_the_release_asks_for_is_named_before_any_download(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "go"
    fake.write_text("#!/bin/sh\necho go1.25.4\n")
    fake.chmod(0o755)
    monkeypatch.setenv("DRAQ_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(build.BuildError, match=r"Kubernetes v1\.37\.2 needs Go >= 1\.26 .* is go1\.25\.4"):
        build.build("1.37")
    assert build.go_floor("v1.35.8") == (1, 25) and build.go_floor("v1.40.0") == (1, 26)
