"""Real workload controllers for the local control plane, built from the Go module proxy and cached.

KubeRay's `ray-operator` and Kubeflow's `training-operator` build with `go install <module>@<version>` as
published (no local replacements in their `go.mod`). Each is cached with the CRDs of its module in
`~/.cache/draq/controllers/<name>/<version>/` (`DRAQ_CACHE_DIR` or `XDG_CACHE_HOME` move it), so that a
test or the demo installs exactly the CRDs the controller was built with. Logs of the builds are in
`~/.cache/draq/build/<name>-<version>/logs/`.

Only the standard library is used to build (this runs before the project's Python deps are installed);
`start` runs a built controller against a control plane's kubeconfig.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from admission.localcluster.build import BuildError, _go, _run_logged, cache_root


@dataclass(frozen=True)
class Controller:
    """A controller published as a Go module: where its main package and its CRDs are."""

    name: str
    module: str
    package: str  # the main package, inside the module
    version: str
    crd_dir: str  # inside the module
    crd_files: tuple[str, ...]  # the CRDs installed (the module may carry more)

    @property
    def command(self) -> str:
        return self.package.rsplit("/", 1)[-1]


RAY_OPERATOR = Controller(
    "ray-operator", "github.com/ray-project/kuberay/ray-operator", "github.com/ray-project/kuberay/ray-operator",
    "v1.5.0", "config/crd/bases", ("ray.io_rayclusters.yaml", "ray.io_rayjobs.yaml"))
TRAINING_OPERATOR = Controller(
    "training-operator", "github.com/kubeflow/training-operator",
    "github.com/kubeflow/training-operator/cmd/training-operator.v1", "v1.8.1", "manifests/base/crds",
    ("kubeflow.org_pytorchjobs.yaml", "kubeflow.org_mpijobs.yaml"))
CONTROLLERS = {c.name: c for c in (RAY_OPERATOR, TRAINING_OPERATOR)}


@dataclass(frozen=True)
class ControllerPaths:
    controller: Controller
    root: Path

    @property
    def dir(self) -> Path:
        return self.root / "controllers" / self.controller.name / self.controller.version

    @property
    def binary(self) -> Path:
        return self.dir / self.controller.command

    @property
    def crds(self) -> list[Path]:
        return [self.dir / "crds" / name for name in self.controller.crd_files]

    @property
    def log_dir(self) -> Path:
        return self.root / "build" / f"{self.controller.name}-{self.controller.version}" / "logs"


def paths_for(controller: Controller) -> ControllerPaths:
    return ControllerPaths(controller, cache_root())


def is_built(paths: ControllerPaths) -> bool:
    return os.access(paths.binary, os.X_OK) and all(p.is_file() for p in paths.crds)


def _env() -> dict[str, str]:
    # As for the control plane: the module proxy's content is used as served (go.sum is checked in the build).
    return dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=mod", GOTOOLCHAIN="local", GOSUMDB="off")


def _module_dir(go: str, controller: Controller, env: dict[str, str], work: Path) -> Path:
    out = subprocess.run([go, "mod", "download", "-json", f"{controller.module}@{controller.version}"],
                         cwd=work, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise BuildError(f"could not download {controller.module}@{controller.version} from the Go module proxy: "
                         f"{(out.stderr or out.stdout).strip()[-800:]}")
    return Path(json.loads(out.stdout)["Dir"])


def build(controller: Controller, force: bool = False) -> ControllerPaths:
    """Build (or reuse) the controller and copy its CRDs next to it; returns where they are."""
    paths = paths_for(controller)
    if is_built(paths) and not force:
        return paths
    go, env = _go(), _env()
    paths.log_dir.mkdir(parents=True, exist_ok=True)
    (paths.dir / "crds").mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    print(f"building {controller.name} {controller.version} into {paths.dir} (cold: a few minutes; cached "
          "afterwards)", flush=True)
    with tempfile.TemporaryDirectory(prefix=f"draq-{controller.name}-") as scratch:
        work = Path(scratch)
        source = _module_dir(go, controller, env, work)
        for name, target in zip(controller.crd_files, paths.crds, strict=True):
            found = source / controller.crd_dir / name
            if not found.is_file():
                raise BuildError(f"{controller.module}@{controller.version} has no {controller.crd_dir}/{name}")
            shutil.copyfile(found, target)
        env["GOBIN"] = str(work / "bin")
        _run_logged([go, "install", "-trimpath", "-ldflags", "-s -w", f"{controller.package}@{controller.version}"],
                    work, paths.log_dir / "build.log", f"building {controller.name}", env)
        partial = paths.binary.with_name(f".{controller.command}.tmp")  # the cache may be on another file system
        shutil.copy2(work / "bin" / controller.command, partial)
        partial.replace(paths.binary)
    print(f"{controller.name} {controller.version} built in {time.monotonic() - started:.0f}s", flush=True)
    return paths


def arguments(controller: Controller, ports: Sequence[int]) -> list[str]:
    """Command-line flags for running the controller outside a cluster: no leader election, local ports.
    `ports`: three free ports (metrics, health probes, and the training-operator's webhook server)."""
    metrics, probes, webhook = ports
    if controller is RAY_OPERATOR:
        return [f"--metrics-addr=127.0.0.1:{metrics}", f"--health-probe-bind-address=127.0.0.1:{probes}",
                "--enable-leader-election=false", "--log-stdout-encoder=console"]
    return [f"--metrics-bind-address=127.0.0.1:{metrics}", f"--health-probe-bind-address=127.0.0.1:{probes}",
            f"--webhook-server-port={webhook}", "--enable-scheme=pytorchjob", "--enable-scheme=mpijob"]


TRAINING_NAMESPACE = "kubeflow"
TRAINING_WEBHOOK_SECRET = "training-operator-webhook-cert"
TRAINING_WEBHOOK_CONFIGURATION = "validator.training-operator.kubeflow.org"


TRAINING_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
"""Where the training operator's certificate rotation waits for its Secret to be mounted (fixed in its code)."""


def training_operator_prerequisites() -> list[dict[str, object]]:
    """What the training operator needs before it starts its controllers: the Secret its certificate
    rotation fills, and the ValidatingWebhookConfiguration it injects its CA into. The configuration has no
    webhooks, so the API server never calls the operator's webhook server (the local control plane has no
    Service network to reach it); its defaulting and validation are not part of what draq is tested with.
    `mount_training_certificates` stands in for the Secret's volume."""
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TRAINING_NAMESPACE}},
        {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
         "metadata": {"name": TRAINING_WEBHOOK_SECRET, "namespace": TRAINING_NAMESPACE}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": TRAINING_WEBHOOK_CONFIGURATION}, "webhooks": []},
    ]


def mount_training_certificates() -> None:
    """Put a serving certificate where the training operator looks for its mounted Secret: it starts its
    controllers only once that file exists, and serves its (never called) webhooks with it."""
    from admission.localcluster import pki  # needs `cryptography`, installed by then

    cert = TRAINING_CERT_DIR / "tls.crt"
    if cert.is_file():
        return
    TRAINING_CERT_DIR.mkdir(parents=True, exist_ok=True)
    ca = pki.make_ca("training-operator-local-ca")
    pki.issue(ca, "training-operator", server=True, dns=("localhost",)).write(TRAINING_CERT_DIR, "tls")
    (TRAINING_CERT_DIR / "ca.crt").write_bytes(ca.cert_pem())


def start(paths: ControllerPaths, kubeconfig: Path, ports: Sequence[int], log: Path,
          environ: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Run the built controller against the control plane of `kubeconfig`, logging to `log`."""
    env = dict(environ if environ is not None else os.environ, KUBECONFIG=str(kubeconfig))
    env.pop("KUBEFLOW_NAMESPACE", None)  # set, the training operator would watch only that namespace
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        return subprocess.Popen([str(paths.binary), *arguments(paths.controller, ports)], stdout=out,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("names", nargs="*", help=f"controllers to build: {', '.join(CONTROLLERS)} (default: all)")
    parser.add_argument("--force", action="store_true", help="build again even if cached")
    parser.add_argument("--print-path", action="store_true", help="print where each one is")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(CONTROLLERS))
    if unknown:
        parser.error(f"unknown controller {', '.join(unknown)}; choose from {', '.join(CONTROLLERS)}")
    try:
        for name in args.names or list(CONTROLLERS):
            paths = build(CONTROLLERS[name], args.force)
            if args.print_path:
                print(paths.dir)
    except BuildError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
