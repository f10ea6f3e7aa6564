"""The workload controllers draq integrates with, running against a local control plane.

`WorkloadControllers` installs the CRDs of JobSet, LeaderWorkerSet, RayCluster/RayJob and PyTorchJob/MPIJob,
starts the real KubeRay and Kubeflow training operators (built by `admission.localcluster.controllers`) and
the stand-in JobSet and LeaderWorkerSet controllers (`admission.localcluster.standins`), and stops them.
"""

from __future__ import annotations

import time
from pathlib import Path
from subprocess import Popen, TimeoutExpired
from typing import Any

import yaml

from admission.localcluster import controllers, standins
from admission.localcluster.controlplane import ControlPlane, ControlPlaneError, free_ports

ESTABLISH_TIMEOUT = 60.0


class WorkloadControllers:
    def __init__(self, plane: ControlPlane, api_client: Any, log_dir: Path | None = None) -> None:
        self.plane = plane
        self.api_client = api_client
        self.log_dir = log_dir or plane.logs_dir
        self.processes: dict[str, Popen[bytes]] = {}
        self.standins = standins.StandInControllers(api_client)

    def start(self) -> WorkloadControllers:
        built = {name: controllers.build(c) for name, c in controllers.CONTROLLERS.items()}
        crds = [*standins.crd_files(), *(p for paths in built.values() for p in paths.crds)]
        self.install(crds)
        self.plane.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(
            controllers.training_operator_prerequisites()))
        controllers.mount_training_certificates()
        for name, paths in built.items():
            ports = free_ports(3)
            self.processes[name] = controllers.start(paths, self.plane.kubeconfig, ports, self.log_dir / f"{name}.log")
        self.standins.start()
        return self

    def install(self, crds: list[Path]) -> None:
        """Apply the CRDs and wait until the API server serves them."""
        for crd in crds:
            self.plane.kubectl("apply", "--server-side", "-f", str(crd))
        names = [yaml.safe_load(p.read_text())["metadata"]["name"] for p in crds]
        deadline = time.monotonic() + ESTABLISH_TIMEOUT
        for name in names:
            left = max(deadline - time.monotonic(), 1.0)
            self.plane.kubectl("wait", "--for=condition=Established", f"--timeout={left:.0f}s", f"crd/{name}")

    def check(self) -> None:
        """Raise if a controller process has exited."""
        for name, process in self.processes.items():
            if process.poll() is not None:
                log = self.log_dir / f"{name}.log"
                raise ControlPlaneError(f"{name} exited with {process.returncode}; see {log}")

    def stop(self) -> None:
        self.standins.stop()
        for process in self.processes.values():
            process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=10)
            except TimeoutExpired:
                process.kill()
        self.processes.clear()

    def __enter__(self) -> WorkloadControllers:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
