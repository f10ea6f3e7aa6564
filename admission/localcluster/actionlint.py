"""Build actionlint from the Go module proxy and cache it per version, like Helm: the release workflow
(`.github/workflows/release.yml`) is for a public CI that cannot run here, so it is checked with actionlint.

Cached in `~/.cache/draq/actionlint/<version>/actionlint` (`DRAQ_CACHE_DIR` or `XDG_CACHE_HOME` move it);
the build log is in `~/.cache/draq/build/actionlint-<version>/logs/`. Only the standard library is used.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from admission.localcluster.build import BuildError, _go, _run_logged, build_command, cache_root

ACTIONLINT_VERSION = "v1.7.7"
_MODULE = "github.com/rhysd/actionlint"


@dataclass(frozen=True)
class ActionlintPaths:
    version: str
    root: Path

    @property
    def binary(self) -> Path:
        return self.root / "actionlint" / self.version / "actionlint"

    @property
    def log_dir(self) -> Path:
        return self.root / "build" / f"actionlint-{self.version}" / "logs"


def build(version: str | None = None, force: bool = False) -> ActionlintPaths:
    """Build (or reuse) actionlint `version`; returns where it is."""
    paths = ActionlintPaths(version or ACTIONLINT_VERSION, cache_root())
    if os.access(paths.binary, os.X_OK) and not force:
        return paths
    if not re.fullmatch(r"v1\.\d+\.\d+", paths.version):
        raise BuildError(f"actionlint version {paths.version!r} is not of the form v1.7.7")
    go = _go()
    paths.log_dir.mkdir(parents=True, exist_ok=True)
    paths.binary.parent.mkdir(parents=True, exist_ok=True)
    print(f"building actionlint {paths.version} into {paths.binary.parent}", flush=True)
    with tempfile.TemporaryDirectory(prefix="draq-actionlint-") as scratch:
        work = Path(scratch)
        # As for Helm: the module proxy's content is used as served (go.sum is still checked in the build).
        env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=mod", GOTOOLCHAIN="local", GOSUMDB="off",
                   GOBIN=str(work / "bin"))
        _run_logged([go, "install", "-trimpath", f"{_MODULE}/cmd/actionlint@{paths.version}"], work,
                    paths.log_dir / "actionlint.log", "building actionlint", env)
        partial = paths.binary.with_name(".actionlint.tmp")
        shutil.copy2(work / "bin" / "actionlint", partial)
        partial.replace(paths.binary)
    return paths


def main(argv: list[str] | None = None) -> int:
    return build_command(argv, __doc__ or "", build,
                         ("--version", f"actionlint release to build (default {ACTIONLINT_VERSION})"),
                         ("--print-path", "print the path of the binary"), lambda paths: paths.binary)


if __name__ == "__main__":
    sys.exit(main())
