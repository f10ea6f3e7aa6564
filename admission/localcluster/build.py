"""Build the Kubernetes control-plane binaries from the Go module proxy and cache them per version.

`k8s.io/kubernetes` replaces its staging modules (`k8s.io/api`, `k8s.io/client-go`, ...) with local
paths, so `go install k8s.io/kubernetes/cmd/...@vX` is refused. A small wrapper module that requires
`k8s.io/kubernetes` and points every staging module at its published `v0.<minor>.<patch>` builds fine.

Only the standard library is used here: this runs before the project's Python deps are installed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

# Pinned to patch releases whose staging modules are all served by the Go module proxy
# (v1.35.6 and v1.34.9 lack k8s.io/externaljwt, k8s.io/kube-proxy or k8s.io/cli-runtime there).
# The default is the newest release; the others are built on demand (`--kubernetes-version`).
DEFAULT_VERSION = "v1.37.2"
COMPAT_VERSION = "v1.34.10"
KNOWN_VERSIONS = {"1.37": DEFAULT_VERSION, "1.36": "v1.36.3", "1.35": "v1.35.8", "1.34": COMPAT_VERSION}
COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
_STAGING_REPLACE = re.compile(r"^\s*(k8s\.io/[\w.-]+)\s*=>\s*\./staging/", re.MULTILINE)
T = TypeVar("T")


class BuildError(RuntimeError):
    """A build step failed; the message says which and where its log is."""


@dataclass(frozen=True)
class BuildPaths:
    version: str
    root: Path

    @property
    def bin_dir(self) -> Path:
        return self.root / "kubernetes" / self.version

    @property
    def work_dir(self) -> Path:
        return self.root / "build" / self.version

    @property
    def log_dir(self) -> Path:
        return self.root / "build" / self.version / "logs"

    def binary(self, command: str) -> Path:
        return self.bin_dir / command


def cache_root() -> Path:
    env = os.environ.get("DRAQ_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "draq"


def resolve_version(version: str | None) -> str:
    """Accept `1.35`, `1.35.6` or `v1.35.6`; `None` means $DRAQ_KUBERNETES_VERSION, else the pinned default."""
    if not version:
        version = os.environ.get("DRAQ_KUBERNETES_VERSION") or DEFAULT_VERSION
    v = version.strip()
    if v.lstrip("v") in KNOWN_VERSIONS:
        return KNOWN_VERSIONS[v.lstrip("v")]
    if not re.fullmatch(r"v?1\.\d+\.\d+", v):
        raise BuildError(f"kubernetes version {version!r} is not of the form 1.35 or v1.35.6")
    return v if v.startswith("v") else "v" + v


def paths_for(version: str | None = None) -> BuildPaths:
    return BuildPaths(resolve_version(version), cache_root())


def is_built(paths: BuildPaths) -> bool:
    return all(os.access(paths.binary(c), os.X_OK) for c in COMMANDS)


# The Go release each Kubernetes minor's go.mod asks for (the build runs with GOTOOLCHAIN=local).
GO_FLOOR = {34: (1, 24), 35: (1, 25), 36: (1, 26), 37: (1, 26)}


def _go(version: str | None = None) -> str:
    """`go` on PATH, checked against what Kubernetes `version`'s go.mod asks for (else against 1.24)."""
    go = shutil.which("go")
    wanted = go_floor(version) if version else (1, 24)
    floor = "{}.{}".format(*wanted)
    if not go:
        raise BuildError(
            "the Go toolchain was not found on PATH: the control plane is built from the Go module "
            f"proxy with `go`; install Go >= {floor} (e.g. from go.dev/dl) and try again"
        )
    found = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True).stdout.strip()
    if _go_release(found) < wanted:
        needs = f"Kubernetes {version}" if version else "this build"
        raise BuildError(f"{needs} needs Go >= {floor} (its go.mod says so) but `go` on PATH is "
                         f"{found or 'of an unknown version'}; install a newer Go or pick an older release "
                         "with --kubernetes-version")
    return go


def go_floor(version: str) -> tuple[int, int]:
    minor = int(version.lstrip("v").split(".")[1])
    return GO_FLOOR.get(minor, GO_FLOOR[max(GO_FLOOR)] if minor > max(GO_FLOOR) else GO_FLOOR[min(GO_FLOOR)])


def _go_release(text: str) -> tuple[int, int]:
    """`go1.26.1` -> (1, 26); anything unparsable -> (0, 0)."""
    found = re.match(r"go(\d+)\.(\d+)", text)
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


def _run_logged(cmd: list[str], cwd: Path, log: Path, what: str, env: dict[str, str]) -> None:
    """Run a command with output to a log file, printing a heartbeat so a long build shows progress."""
    start = time.monotonic()
    done = threading.Event()

    def heartbeat() -> None:
        while not done.wait(30):
            print(f"  ... {what}: {time.monotonic() - start:.0f}s", flush=True)

    ticker = threading.Thread(target=heartbeat, daemon=True)
    ticker.start()
    try:
        with log.open("w") as out:
            rc = subprocess.call(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env)
    finally:
        done.set()
    if rc != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise BuildError(f"{what} failed (exit {rc}); full log: {log}\n{tail}")
    print(f"  {what}: done in {time.monotonic() - start:.0f}s", flush=True)


def _staging_modules(go: str, version: str, work: Path, env: dict[str, str]) -> list[str]:
    out = subprocess.run(
        [go, "mod", "download", "-json", f"k8s.io/kubernetes@{version}"],
        cwd=work, env=env, capture_output=True, text=True,
    )
    if out.returncode != 0:
        raise BuildError(
            f"could not download k8s.io/kubernetes@{version} from the Go module proxy: "
            f"{(out.stderr or out.stdout).strip()[-800:]}"
        )
    info = json.loads(out.stdout)
    gomod = Path(info["GoMod"]).read_text()
    modules = sorted(set(_STAGING_REPLACE.findall(gomod)))
    if not modules:
        raise BuildError(f"no staging modules found in the go.mod of k8s.io/kubernetes@{version}")
    return modules


def _write_wrapper(work: Path, version: str, staging: list[str]) -> None:
    staging_version = "v0." + version.lstrip("v").split(".", 1)[1]
    lines = ["module draq.local/kubebuild", "", "go 1.24", "",
             f"require k8s.io/kubernetes {version}", "", "replace ("]
    lines += [f"\t{m} => {m} {staging_version}" for m in staging]
    lines += [")", ""]
    (work / "go.mod").write_text("\n".join(lines))
    imports = "\n".join(f'\t_ "k8s.io/kubernetes/cmd/{c}/app"' for c in COMMANDS if c != "kubectl")
    (work / "tools.go").write_text(
        "//go:build tools\n\npackage tools\n\nimport (\n" + imports
        + '\n\t_ "k8s.io/kubectl/pkg/cmd"\n)\n'
    )


def _ldflags(version: str) -> str:
    major, minor = version.lstrip("v").split(".")[:2]
    stamps = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        stamps += [f"-X {pkg}.gitVersion={version}", f"-X {pkg}.gitMajor={major}",
                   f"-X {pkg}.gitMinor={minor}", f"-X {pkg}.gitTreeState=clean"]
    return "-s -w " + " ".join(stamps)


def build(version: str | None = None, force: bool = False) -> BuildPaths:
    """Build (or reuse) the binaries for `version`; returns where they are."""
    paths = paths_for(version)
    if is_built(paths) and not force:
        return paths
    v = paths.version
    go = _go(v)
    paths.work_dir.mkdir(parents=True, exist_ok=True)
    paths.log_dir.mkdir(parents=True, exist_ok=True)
    paths.bin_dir.mkdir(parents=True, exist_ok=True)
    # The checksum database does not know every published staging module version; the module
    # proxy's content is trusted instead (go.sum is still written and checked within the build).
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=mod", GOTOOLCHAIN="local", GOSUMDB="off")
    started = time.monotonic()
    print(f"building Kubernetes {v} control plane into {paths.bin_dir} "
          f"(cold: about 7 min on 2 idle cores; cached afterwards)", flush=True)
    staging = _staging_modules(go, v, paths.work_dir, env)
    _write_wrapper(paths.work_dir, v, staging)
    _run_logged([go, "mod", "tidy"], paths.work_dir, paths.log_dir / "go-mod-tidy.log",
                "resolving modules", env)
    ldflags = _ldflags(v)
    for i, command in enumerate(COMMANDS, 1):
        if paths.binary(command).exists() and not force:
            continue
        pkg = f"k8s.io/kubernetes/cmd/{command}"
        tmp = paths.bin_dir / f".{command}.tmp"
        _run_logged([go, "build", "-trimpath", "-ldflags", ldflags, "-o", str(tmp), pkg],
                    paths.work_dir, paths.log_dir / f"{command}.log",
                    f"building {command} ({i}/{len(COMMANDS)})", env)
        tmp.replace(paths.binary(command))
    print(f"Kubernetes {v} built in {time.monotonic() - started:.0f}s", flush=True)
    return paths


def build_command(argv: list[str] | None, doc: str, build: Callable[[str | None, bool], T],
                  version_option: tuple[str, str], print_option: tuple[str, str], printed: Callable[[T], Path]) -> int:
    """`python -m` of a build module (this one, `helm`): build one version (an option, with its help), or
    reuse the cached one unless `--force`; on request print where the result is; a failed build is one line
    on standard error and status 1."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0], allow_abbrev=False)
    parser.add_argument(version_option[0], dest="version", default=None, help=version_option[1],
                        metavar=version_option[0].lstrip("-").upper().replace("-", "_"))
    parser.add_argument("--force", action="store_true", help="rebuild even if cached")
    parser.add_argument(print_option[0], dest="print", action="store_true", help=print_option[1])
    args = parser.parse_args(argv)
    try:
        built = build(args.version, args.force)
    except BuildError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if args.print:
        print(printed(built))
    return 0


def main(argv: list[str] | None = None) -> int:
    return build_command(argv, __doc__ or "", build,
                         ("--kubernetes-version", "1.35 (default), 1.37, 1.36 or 1.34, or vX.Y.Z"),
                         ("--print-dir", "print the binary directory"), lambda paths: paths.bin_dir)


if __name__ == "__main__":
    sys.exit(main())
