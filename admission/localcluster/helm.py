"""Build Helm from the Go module proxy and cache it per version, like the control plane binaries.

`helm.sh/helm/v3/cmd/helm` has no local replacements in its `go.mod`, so `go install …@<version>` builds
it as published. The binary is stamped the way Helm's own Makefile stamps a release (its version, and
the Kubernetes version `helm template` and `helm lint` assume, from the client-go it is built with), and
cached in `~/.cache/draq/helm/<version>/helm` (`DRAQ_CACHE_DIR` or `XDG_CACHE_HOME` move it). Logs of
the build are in `~/.cache/draq/build/helm-<version>/logs/`.

Only the standard library is used here: this runs before the project's Python deps are installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from admission.localcluster.build import BuildError, _go, _run_logged, build_command, cache_root

# Helm 3.19 is the newest minor whose go.mod asks for Go 1.24 (3.20 wants 1.25, 3.21 wants 1.26), so
# the project's toolchain floor stays where the control plane build puts it.
HELM_VERSION = "v3.19.5"
_MODULE = "helm.sh/helm/v3"
_CLIENT_GO = re.compile(r"^\s*k8s\.io/client-go\s+v0\.(\d+)\.\d+", re.MULTILINE)


@dataclass(frozen=True)
class HelmPaths:
    version: str
    root: Path

    @property
    def binary(self) -> Path:
        return self.root / "helm" / self.version / "helm"

    @property
    def log_dir(self) -> Path:
        return self.root / "build" / f"helm-{self.version}" / "logs"


def paths_for(version: str | None = None) -> HelmPaths:
    return HelmPaths(version or os.environ.get("DRAQ_HELM_VERSION") or HELM_VERSION, cache_root())


def is_built(paths: HelmPaths) -> bool:
    return os.access(paths.binary, os.X_OK)


def _env() -> dict[str, str]:
    # As for the control plane: the checksum database reachable here does not list every module version,
    # so the module proxy's content is used as served (go.sum is still checked within the build).
    return dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=mod", GOTOOLCHAIN="local", GOSUMDB="off")


def kubernetes_minor(go_mod: str) -> int:
    """The Kubernetes minor release Helm is built against: client-go v0.<minor>.x is Kubernetes 1.<minor>."""
    found = _CLIENT_GO.search(go_mod)
    if not found:
        raise BuildError(f"no k8s.io/client-go requirement in the go.mod of {_MODULE}")
    return int(found.group(1))


def ldflags(version: str, minor: int) -> str:
    """What Helm's Makefile passes: the version, and the Kubernetes version for .Capabilities and lint."""
    flags = ["-s", "-w", f"-X {_MODULE}/internal/version.version={version}",
             f"-X {_MODULE}/internal/version.gitTreeState=clean"]
    for package in ("pkg/chartutil", "pkg/lint/rules"):
        flags += [f"-X {_MODULE}/{package}.k8sVersionMajor=1", f"-X {_MODULE}/{package}.k8sVersionMinor={minor}"]
    return " ".join(flags)


def _go_mod(go: str, version: str, env: dict[str, str], work: Path) -> str:
    out = subprocess.run([go, "mod", "download", "-json", f"{_MODULE}@{version}"],
                         cwd=work, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise BuildError(f"could not download {_MODULE}@{version} from the Go module proxy: "
                         f"{(out.stderr or out.stdout).strip()[-800:]}")
    return Path(json.loads(out.stdout)["GoMod"]).read_text()


def build(version: str | None = None, force: bool = False) -> HelmPaths:
    """Build (or reuse) Helm `version`; returns where it is."""
    paths = paths_for(version)
    if is_built(paths) and not force:
        return paths
    if not re.fullmatch(r"v3\.\d+\.\d+", paths.version):
        raise BuildError(f"helm version {paths.version!r} is not of the form v3.19.5")
    go = _go()
    env = _env()
    paths.log_dir.mkdir(parents=True, exist_ok=True)
    paths.binary.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    print(f"building Helm {paths.version} into {paths.binary.parent} (cold: a few minutes; cached afterwards)",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="draq-helm-") as scratch:
        work = Path(scratch)
        minor = kubernetes_minor(_go_mod(go, paths.version, env, work))
        env["GOBIN"] = str(work / "bin")
        _run_logged([go, "install", "-trimpath", "-ldflags", ldflags(paths.version, minor),
                     f"{_MODULE}/cmd/helm@{paths.version}"], work, paths.log_dir / "helm.log",
                    "building helm", env)
        partial = paths.binary.with_name(".helm.tmp")  # the cache may be on another file system
        shutil.copy2(work / "bin" / "helm", partial)
        partial.replace(paths.binary)
    print(f"Helm {paths.version} built in {time.monotonic() - started:.0f}s", flush=True)
    return paths


def main(argv: list[str] | None = None) -> int:
    return build_command(argv, __doc__ or "", build, ("--version", f"Helm release to build (default {HELM_VERSION})"),
                         ("--print-path", "print the path of the binary"), lambda paths: paths.binary)


if __name__ == "__main__":
    sys.exit(main())
