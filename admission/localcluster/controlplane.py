"""Start and stop a real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver,
kube-controller-manager and kube-scheduler, without a kubelet or container runtime.

Used by the e2e test fixture and by `draq demo`. Every failure names the component, the log to
read and what to do; a failed start stops whatever had already started.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from admission.localcluster import build, pki

# Enough controllers for DRA, the workload kinds draq groups (Jobs, ReplicaSets, Deployments, StatefulSets),
# quota and namespace clean-up. The node-lifecycle controller is
# left out on purpose: hand-made Nodes have no heartbeat, so it would mark them NotReady and evict.
CONTROLLERS = tuple(f"{name}-controller" for name in (
    "serviceaccount", "serviceaccount-token", "resourceclaim", "garbage-collector", "namespace",
    "resourcequota", "job", "replicaset", "deployment", "statefulset", "pod-garbage-collector",
    "clusterrole-aggregation", "root-ca-certificate-publisher", "ttl-after-finished",
))
ALPHA_DRA_GATES = ("DRAConsumableCapacity", "DRAExtendedResource", "DRAPartitionableDevices",
                   "DRADeviceTaints", "DRADeviceBindingConditions")
# Alpha in 1.37 and modelled by draq's allocator: what `--alpha-dra` adds there.
ALPHA_DRA_GATES_1_37 = ("DRADeviceCompatibilityGroups", "DRADerivedAttributes", "DRAOptionalNodeOperations")
ALPHA_GANG_GATES = ("GenericWorkload", "GangScheduling")
# The Workload API version each release serves for native gangs; 1.37 folded GangScheduling into
# GenericWorkload (the gate is gone, and naming an unknown gate stops a component from starting).
GANG_API = {34: "v1alpha1", 35: "v1alpha1", 36: "v1alpha2", 37: "v1beta1"}
STARTUP_TIMEOUT = float(os.environ.get("DRAQ_STARTUP_TIMEOUT", "90"))


def gang_gates(minor: int) -> tuple[str, ...]:
    return ("GenericWorkload",) if minor >= 37 else ALPHA_GANG_GATES


def gang_api(minor: int) -> str:
    """The scheduling.k8s.io version serving Workload on a release (the newest known for later ones)."""
    return GANG_API.get(minor, GANG_API[max(GANG_API)] if minor > max(GANG_API) else GANG_API[min(GANG_API)])


class ControlPlaneError(RuntimeError):
    """A component could not be built, started or reached. The message says which and what to do."""


@dataclass
class Component:
    name: str
    argv: list[str]
    log: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        out = self.log.open("ab")
        try:
            self.process = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as err:
            raise ControlPlaneError(f"{self.name} could not be started ({err}); command: {self.argv[0]}") from err
        finally:
            out.close()

    def exited(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def stop(self, grace: float = 10.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(5)

    def log_tail(self, lines: int = 12) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@dataclass
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int


# Below Linux's ephemeral range (32768-60999 by default): a port the kernel may hand to an outgoing
# connection between our choice and the component's bind would make it fail with "address in use".
_LISTEN_PORTS = range(20000, 32000)


def free_port(taken: Collection[int] = ()) -> int:
    """A port on 127.0.0.1 that nothing listens on now, outside the range outgoing connections use, and not
    one of `taken` (chosen for a process that has not started yet)."""
    for port in random.sample(_LISTEN_PORTS, 64):
        if port in taken:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    while True:  # all taken: let the kernel choose
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in taken:
            return port


def free_ports(count: int, taken: Collection[int] = ()) -> list[int]:
    """`count` different free ports (`free_port`): ports chosen one by one for processes started later could
    otherwise be the same one twice (etcd and the controller-manager were once given the same port)."""
    chosen: list[int] = []
    for _ in range(count):
        chosen.append(free_port({*taken, *chosen}))
    return chosen


def ensure_port_free(port: int, component: str) -> None:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as err:
            raise ControlPlaneError(
                f"port {port} for {component} on 127.0.0.1 is already in use ({err.strerror}); stop what "
                f"listens there (`ss -ltnp 'sport = :{port}'`) or choose other ports") from err


def allocate_ports(apiserver_port: int | None = None) -> Ports:
    etcd_client, etcd_peer, apiserver, controller_manager, scheduler = free_ports(
        5, taken=(apiserver_port,) if apiserver_port else ())
    ports = Ports(etcd_client, etcd_peer, apiserver_port or apiserver, controller_manager, scheduler)
    if apiserver_port:
        ensure_port_free(apiserver_port, "kube-apiserver")
    return ports


@dataclass
class ControlPlane:
    """A running (or startable) local control plane. Use as a context manager or call start/stop."""

    work_dir: Path
    version: str | None = None
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    alpha_dra: bool = False
    # Native gang scheduling (Kubernetes 1.35 alpha): the Workload API and the scheduler's gang plugin.
    alpha_gangs: bool = False
    apiserver_port: int | None = None
    keep_work_dir: bool = True
    components: list[Component] = field(default_factory=list)
    ports: Ports | None = None
    binaries: build.BuildPaths | None = None

    # ----- paths and access -------------------------------------------------------------------------
    @property
    def pki_dir(self) -> Path:
        return self.work_dir / "pki"

    @property
    def logs_dir(self) -> Path:
        return self.work_dir / "logs"

    @property
    def kubeconfig(self) -> Path:
        return self.work_dir / "admin.kubeconfig"

    @property
    def server(self) -> str:
        assert self.ports is not None, "control plane not started"
        return f"https://127.0.0.1:{self.ports.apiserver}"

    @property
    def kubectl_path(self) -> str:
        assert self.binaries is not None, "control plane not started"
        return str(self.binaries.binary("kubectl"))

    def gates(self) -> dict[str, bool]:
        gates = {g: True for g in ALPHA_DRA_GATES} if self.alpha_dra else {}
        if self.alpha_dra and self.minor() >= 37:
            gates.update({g: True for g in ALPHA_DRA_GATES_1_37})
        if self.alpha_gangs:
            gates.update({g: True for g in gang_gates(self.minor())})
        gates.update(self.feature_gates)
        return gates

    def minor(self) -> int:
        return int(build.resolve_version(self.version).lstrip("v").split(".")[1])

    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                timeout: float = 60) -> subprocess.CompletedProcess[str]:
        cmd = [self.kubectl_path, "--kubeconfig", str(self.kubeconfig), *args]
        result = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise ControlPlaneError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
        return result

    def client(self) -> Any:
        """A `kubernetes.client.ApiClient` with admin rights (imported lazily: the build needs no deps)."""
        from kubernetes import client, config

        configuration = client.Configuration()
        config.load_kube_config(config_file=str(self.kubeconfig), client_configuration=configuration)
        return client.ApiClient(configuration)

    # ----- lifecycle ---------------------------------------------------------------------------------
    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, progress: bool = False) -> None:
        say = (lambda msg: print(msg, flush=True)) if progress else (lambda msg: None)
        self.binaries = build.build(self.version)
        etcd = shutil.which("etcd")
        if not etcd:
            raise ControlPlaneError("etcd was not found on PATH: install it with `apt-get install -y etcd-server` "
                                    "(Debian's etcd 3.4 works with Kubernetes 1.34 and 1.35)")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.logs_dir.mkdir(exist_ok=True)
        self.ports = allocate_ports(self.apiserver_port)
        self._write_pki()
        atexit.register(self.stop)
        started = time.monotonic()
        try:
            self._launch("etcd", self._etcd_argv(etcd))
            self._wait_http("etcd", f"http://127.0.0.1:{self.ports.etcd_client}/health")
            say(f"  etcd ready ({time.monotonic() - started:.1f}s)")
            self._launch("kube-apiserver", self._apiserver_argv())
            self._wait_http("kube-apiserver", f"{self.server}/readyz")
            say(f"  kube-apiserver ready on {self.server} ({time.monotonic() - started:.1f}s)")
            self._launch("kube-controller-manager", self._controller_manager_argv())
            self._launch("kube-scheduler", self._scheduler_argv())
            self._wait_http("kube-controller-manager", f"https://127.0.0.1:{self.ports.controller_manager}/healthz")
            self._wait_http("kube-scheduler", f"https://127.0.0.1:{self.ports.scheduler}/healthz")
            self._wait_default_service_account()
            say(f"  controller-manager and scheduler ready ({time.monotonic() - started:.1f}s)")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for component in reversed(self.components):
            component.stop()
        self.components.clear()
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        if not self.keep_work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    # ----- faults (chaos tests) ---------------------------------------------------------------------
    def restart(self, name: str, down_seconds: float = 0.0, crash: bool = False) -> None:
        """Stop one component (SIGTERM, SIGKILL after the grace time; with `crash` SIGKILL at once), keep
        it down `down_seconds`, start it again with the same command line and ports, and wait until it is
        ready again."""
        component = self._component(name)
        component.stop(grace=0.0 if crash else 10.0)
        time.sleep(down_seconds)
        component.start()
        self._wait_http(name, self._health_url(name))

    @contextlib.contextmanager
    def paused(self, name: str) -> Iterator[None]:
        """Freeze one component (SIGSTOP) until the block ends (SIGCONT): it is unreachable as behind a
        cut network, connections hang rather than being refused."""
        process = self._component(name).process
        assert process is not None and process.poll() is None, f"{name} is not running"
        os.kill(process.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(process.pid, signal.SIGCONT)

    def exited_components(self) -> dict[str, str]:
        """Each component that has exited since it started, with its exit code and the tail of its log."""
        return {c.name: f"exit {code}; log {c.log}:\n{c.log_tail(30)}"
                for c in self.components if (code := c.exited()) is not None}

    def _health_url(self, name: str) -> str:
        assert self.ports is not None
        return {"etcd": f"http://127.0.0.1:{self.ports.etcd_client}/health",
                "kube-apiserver": f"{self.server}/readyz",
                "kube-controller-manager": f"https://127.0.0.1:{self.ports.controller_manager}/healthz",
                "kube-scheduler": f"https://127.0.0.1:{self.ports.scheduler}/healthz"}[name]

    def _launch(self, name: str, argv: list[str]) -> None:
        component = Component(name, argv, self.logs_dir / f"{name}.log")
        component.start()
        self.components.append(component)

    def _component(self, name: str) -> Component:
        return next(c for c in self.components if c.name == name)

    def _wait_http(self, name: str, url: str, timeout: float = STARTUP_TIMEOUT) -> None:
        component = self._component(name)
        context = self._tls_context()
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            code = component.exited()
            if code is not None:
                raise ControlPlaneError(
                    f"{name} exited with status {code} during start-up; read {component.log}:\n"
                    f"{component.log_tail()}\nFix the cause shown above (a port in use, a bad flag, a stale "
                    f"data directory) and start again.")
            try:
                with urllib.request.urlopen(url, timeout=2, context=context) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError) as err:
                last = str(err)
            time.sleep(0.1)
        raise ControlPlaneError(f"{name} did not become ready within {timeout:.0f}s ({url}: {last}); read "
                                f"{component.log} and raise DRAQ_STARTUP_TIMEOUT if the machine is very busy")

    def wait_for_service_account(self, namespace: str, timeout: float = 30) -> None:
        """Pods can be created in a namespace only once its `default` ServiceAccount exists."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.kubectl("get", "serviceaccount", "default", "-n", namespace, check=False).returncode == 0:
                return
            time.sleep(0.1)
        raise ControlPlaneError(f"the default ServiceAccount of namespace {namespace} was not created within "
                                f"{timeout:.0f}s; read {self.logs_dir / 'kube-controller-manager.log'}")

    def _wait_default_service_account(self) -> None:
        self.wait_for_service_account("default")

    def _tls_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.pki_dir / "ca.crt"))
        context.load_cert_chain(self.pki_dir / "admin.crt", self.pki_dir / "admin.key")
        # Scheduler and controller-manager serve self-signed certs of their own on /healthz.
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context

    # ----- configuration ----------------------------------------------------------------------------
    def _write_pki(self) -> None:
        self.pki_dir.mkdir(parents=True, exist_ok=True)
        ca = pki.make_ca()
        ca.write(self.pki_dir, "ca")
        pki.issue(ca, "kube-apiserver", server=True, ips=("127.0.0.1", "10.0.0.1"),
                  dns=("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                       "kubernetes.default.svc.cluster.local")).write(self.pki_dir, "apiserver")
        pki.make_service_account_keys(self.pki_dir)
        users = {"admin": ("draq-admin", "system:masters"),
                 "controller-manager": ("system:kube-controller-manager", None),
                 "scheduler": ("system:kube-scheduler", None)}
        for stem, (cn, org) in users.items():
            pair = pki.issue(ca, cn, organization=org, client=True)
            pair.write(self.pki_dir, stem)
            self._write_kubeconfig(self.work_dir / f"{stem}.kubeconfig", ca, pair)

    def _write_kubeconfig(self, path: Path, ca: pki.KeyPair, user: pki.KeyPair) -> None:
        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode()
        text = f"""apiVersion: v1
kind: Config
clusters:
- name: draq-local
  cluster:
    server: {self.server}
    certificate-authority-data: {b64(ca.cert_pem())}
users:
- name: user
  user:
    client-certificate-data: {b64(user.cert_pem())}
    client-key-data: {b64(user.key_pem())}
contexts:
- name: draq-local
  context: {{cluster: draq-local, user: user}}
current-context: draq-local
"""
        path.write_text(text)
        path.chmod(0o600)

    def _gate_flag(self) -> list[str]:
        gates = self.gates()
        if not gates:
            return []
        return ["--feature-gates=" + ",".join(f"{k}={str(v).lower()}" for k, v in sorted(gates.items()))]

    def _etcd_argv(self, etcd: str) -> list[str]:
        assert self.ports is not None
        client, peer = f"http://127.0.0.1:{self.ports.etcd_client}", f"http://127.0.0.1:{self.ports.etcd_peer}"
        return [etcd, "--name=default", f"--data-dir={self.work_dir / 'etcd'}",
                f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=default={peer}", "--log-level=warn",
                "--quota-backend-bytes=4294967296", "--snapshot-count=100000"]

    def _apiserver_argv(self) -> list[str]:
        assert self.ports is not None and self.binaries is not None
        p = self.pki_dir
        argv = [str(self.binaries.binary("kube-apiserver")),
                f"--etcd-servers=http://127.0.0.1:{self.ports.etcd_client}",
                "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
                f"--secure-port={self.ports.apiserver}", f"--cert-dir={p}",
                f"--tls-cert-file={p / 'apiserver.crt'}", f"--tls-private-key-file={p / 'apiserver.key'}",
                f"--client-ca-file={p / 'ca.crt'}",
                f"--service-account-key-file={p / 'sa.pub'}",
                f"--service-account-signing-key-file={p / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--authorization-mode=RBAC,Node",
                "--endpoint-reconciler-type=none",
                "--disable-admission-plugins=TaintNodesByCondition",
                "--allow-privileged=true", "--profiling=false", "--v=1"]
        runtime = []
        if self.alpha_dra and build.resolve_version(self.version).startswith("v1.34"):
            # 1.34's scheduler only schedules with DRADeviceTaints on when v1alpha3 is served.
            runtime.append("resource.k8s.io/v1alpha3=true")
        if self.alpha_gangs:
            runtime.append(f"scheduling.k8s.io/{gang_api(self.minor())}=true")
        if runtime:
            argv.append("--runtime-config=" + ",".join(runtime))
        return argv + self._gate_flag()

    def _component_argv(self, binary: str, kubeconfig: str, port: int) -> list[str]:
        assert self.binaries is not None
        config = str(self.work_dir / kubeconfig)
        return [str(self.binaries.binary(binary)), f"--kubeconfig={config}",
                f"--authentication-kubeconfig={config}", f"--authorization-kubeconfig={config}",
                "--bind-address=127.0.0.1", f"--secure-port={port}",
                f"--cert-dir={self.work_dir / binary}", "--leader-elect=false", "--v=1"]

    def _controller_manager_argv(self) -> list[str]:
        assert self.ports is not None
        return [*self._component_argv("kube-controller-manager", "controller-manager.kubeconfig",
                                      self.ports.controller_manager),
                f"--controllers={','.join(CONTROLLERS)}",
                f"--service-account-private-key-file={self.pki_dir / 'sa.key'}",
                f"--root-ca-file={self.pki_dir / 'ca.crt'}",
                "--use-service-account-credentials=true",
                *self._gate_flag()]

    def _scheduler_argv(self) -> list[str]:
        assert self.ports is not None
        return [*self._component_argv("kube-scheduler", "scheduler.kubeconfig", self.ports.scheduler),
                *self._gate_flag()]


@contextlib.contextmanager
def running(work_dir: Path | None = None, **options: Any) -> Iterator[ControlPlane]:
    """A control plane in `work_dir` (a fresh temporary directory if None), stopped on exit."""
    directory = work_dir or Path(tempfile.mkdtemp(prefix="draq-cp-"))
    plane = ControlPlane(directory, **options)
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


def main(argv: list[str] | None = None) -> int:
    """`python -m admission.localcluster.controlplane`: start a control plane and keep it running until Ctrl-C."""
    import argparse

    parser = argparse.ArgumentParser(description="Run a local Kubernetes control plane on 127.0.0.1.",
                                     allow_abbrev=False)
    parser.add_argument("--kubernetes-version", default=None)
    parser.add_argument("--alpha-dra", action="store_true", help="turn on the alpha DRA feature gates")
    parser.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "draq-cp")
    parser.add_argument("--port", type=int, default=None, help="kube-apiserver port (default: a free one)")
    args = parser.parse_args(argv)
    if args.work_dir.exists():
        shutil.rmtree(args.work_dir)
    plane = ControlPlane(args.work_dir, version=args.kubernetes_version, alpha_dra=args.alpha_dra,
                         apiserver_port=args.port)
    try:
        started = time.monotonic()
        plane.start(progress=True)
        print(f"control plane ready in {time.monotonic() - started:.1f}s\n"
              f"export KUBECONFIG={plane.kubeconfig}", flush=True)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    except (ControlPlaneError, build.BuildError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    finally:
        plane.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
