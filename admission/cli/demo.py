"""`draq demo`: the main job on a local default.

Starts a real local control plane with simulated GPU nodes, installs the CRDs, runs draq (operator
and webhooks, with the JobSet and LeaderWorkerSet integrations on) and the kit's stand-in JobSet and
LeaderWorkerSet controllers against it, submits example workloads (`examples/demo/`) and shows queues,
pod groups and pods as they change. With `--topology` the nodes are two simulated NVL72-like racks, one of
them fragmented by small pods, and a gang that requires one rack is planned whole in the other (`draq topology`
shows each rack's free room). It runs on the local-cluster kit (`admission.localcluster`), which only a source
checkout has (docs/install.md, "The local-cluster kit"); without it the command says how to get it.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from admission.core.errors import DraqError
from admission.core.labels import GROUP_LABEL
from admission.core.simulate import PROFILES

HELP = "start a local control plane with simulated GPU nodes, run draq on it and show workloads being admitted"
DEFAULT_LAYOUT = "h100=2,a100=1,mi300x=1"
REPO = Path(__file__).resolve().parents[2]
DEMO_MANIFESTS = REPO / "examples" / "demo"
TOPOLOGY_MANIFESTS = REPO / "examples" / "demo-topology"
TOPOLOGY_RACKS = ("nvl72-a", "nvl72-b")  # the first is fragmented by the pods of holders.yaml
TOPOLOGY_BLOCK = "block-0"
TOPOLOGY_SNAPSHOTS_ONCE = (4, 12)
_JSONPATH_GROUP_LABEL = GROUP_LABEL.replace(".", "\\.")  # kubectl's custom columns escape dots in keys
SNAPSHOTS_ONCE = (4, 10, 18, 26, 34)  # seconds after the workloads were submitted
FIRST_WORKLOADS = ("workloads.yaml", "integrations.yaml")
LATER_WORKLOADS = ("later-workloads.yaml",)  # two seconds later, so FIFO order is visible
INTEGRATIONS = ("batch/job", "deployment", "statefulset", "jobset.x-k8s.io/jobset",
                "leaderworkerset.x-k8s.io/leaderworkerset")
"""The workload kinds `draq run` groups in the demo: the defaults and the two whose stand-ins the demo runs."""


KIT_MISSING = ("the demo runs on the local-cluster kit (admission.localcluster), which only a source checkout "
               "has: installed wheels and the container image leave it out. Clone the repository and run "
               "`make demo` there (or `pip install -e '.[local]'` in the checkout, then `draq demo`)")


class DemoError(DraqError):
    pass


def require_kit() -> None:
    """The kit is an optional part (docs/install.md): without it, say how to get it."""
    if importlib.util.find_spec("admission.localcluster") is None:
        raise DemoError(KIT_MISSING)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", default=None,
                        help=f"simulated nodes per GPU profile (default {DEFAULT_LAYOUT}, none with --topology; "
                             "profiles: h100, a100, mi300x)")
    parser.add_argument("--topology", action="store_true",
                        help="two NVL72-like racks (18 nodes x 4 GPUs, one NVLink clique each), one fragmented: "
                             "a gang that requires one rack is planned whole in the other (examples/demo-topology/)")
    parser.add_argument("--partitions", action="store_true",
                        help="publish MIG/CPX partitions with shared counters (turns on the alpha DRA gates)")
    parser.add_argument("--kubernetes-version", default=None, help="1.35 (default) or 1.34")
    parser.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "draq-demo",
                        help="state, PKI and logs of the local control plane and of draq (default %(default)s)")
    parser.add_argument("--once", action="store_true",
                        help="show a few snapshots over ~35 s and stop, instead of running until Ctrl-C")
    parser.add_argument("--no-workloads", action="store_true",
                        help="only start the cluster and show its devices (draq itself is not started)")


def parse_layout(text: str) -> dict[str, int]:
    layout: dict[str, int] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, _, count = item.partition("=")
        if name not in PROFILES or not count.isdigit():
            raise DemoError(f"--nodes: {item!r} is not PROFILE=COUNT with PROFILE one of "
                            + ", ".join(PROFILES))
        layout[name] = int(count)
    return layout


def run(args: argparse.Namespace) -> int:
    require_kit()
    from admission.localcluster.build import BuildError
    from admission.localcluster.controlplane import ControlPlane, ControlPlaneError

    layout = parse_layout(args.nodes if args.nodes is not None else "" if args.topology else DEFAULT_LAYOUT)
    manifests = TOPOLOGY_MANIFESTS if args.topology else DEMO_MANIFESTS
    if not args.no_workloads and not manifests.is_dir():
        raise DemoError(f"{manifests} is missing: run the demo from a clone of the repository "
                        "(pip install -e .), or pass --no-workloads")
    if args.work_dir.exists():
        shutil.rmtree(args.work_dir)
    plane = ControlPlane(args.work_dir, version=args.kubernetes_version, alpha_dra=args.partitions)
    print(f"starting a local Kubernetes control plane in {args.work_dir} ...", flush=True)
    started = time.monotonic()
    draq: subprocess.Popen[bytes] | None = None
    standins: Any = None
    try:
        plane.start(progress=True)
        print(f"control plane ready in {time.monotonic() - started:.1f}s", flush=True)
        simulator = _start_nodes(plane, layout, args.partitions, TOPOLOGY_RACKS if args.topology else ())
        if args.topology and not args.no_workloads:
            draq = start_draq(plane, args.kubernetes_version)
            _submit_topology_workloads(plane)
            _watch(plane, args.once, topology=True)
        elif not args.no_workloads:
            draq = start_draq(plane, args.kubernetes_version)
            standins = _start_standins(plane)
            _submit_workloads(plane)
            _watch(plane, args.once)
        elif not args.once:
            _wait_for_interrupt(plane)
        simulator.stop()
    except (ControlPlaneError, BuildError) as err:
        raise DemoError(str(err)) from err
    finally:
        if standins is not None:
            standins.stop()
        if draq is not None:
            draq.terminate()
            draq.wait(10)
        plane.stop()
    return 0


def _start_nodes(plane: Any, layout: dict[str, int], partitions: bool, racks: tuple[str, ...] = ()) -> Any:
    from admission.localcluster.inventory import format_device_table, list_resource_slices, summarise_slices
    from admission.localcluster.nodesim import NodeSimulator

    api = plane.client()
    sim = NodeSimulator(api)
    sim.apply_device_classes()
    for profile, count in layout.items():
        for n in range(count):
            sim.add_node(f"{profile}-{n}", profile, partitions=partitions)
    for rack in racks:
        sim.add_rack(rack, "nvl72", block=TOPOLOGY_BLOCK, partitions=partitions)
    sim.start()
    shown = [f"{c} x {p}" for p, c in layout.items()] + [f"NVL72-like rack {r} (18 x gb200)" for r in racks]
    print(f"\nsimulated nodes: {', '.join(shown)}\n")
    print(format_device_table(summarise_slices(list_resource_slices(api))), flush=True)
    return sim


def _start_standins(plane: Any) -> Any:
    """The kit's stand-in JobSet and LeaderWorkerSet controllers, in a thread of this process."""
    from admission.localcluster.standins import StandInControllers

    print("stand-in JobSet and LeaderWorkerSet controllers running (admission/localcluster/standins.py)", flush=True)
    return StandInControllers(plane.client()).start()


def start_draq(plane: Any, version: str | None) -> subprocess.Popen[bytes]:
    from admission.localcluster import standins
    from admission.localcluster.controlplane import free_ports

    # The workload CRDs before draq starts: it watches only the kinds served when it starts.
    plane.kubectl("apply", "-f", str(REPO / "crds"), *(f"--filename={p}" for p in standins.crd_files()))
    _wait_for_crds(plane)
    plane.kubectl("create", "namespace", "draq-system")
    kubeconfig = _service_account_kubeconfig(plane)
    port, metrics_port = free_ports(2)
    log = plane.logs_dir / "draq.log"
    argv = [sys.executable, "-m", "admission.cli.main", "run", "--no-leader-election",
            "--webhook-host", "127.0.0.1", "--webhook-port", str(port),
            "--webhook-url", f"https://127.0.0.1:{port}",
            "--metrics-host", "127.0.0.1", "--metrics-port", str(metrics_port),
            "--integrations", ",".join(INTEGRATIONS)]
    if version:
        argv += ["--kubernetes-version", version]
    env = dict(os.environ, KUBECONFIG=str(kubeconfig))
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise DemoError(f"draq run exited with status {process.returncode}; read {log}")
        configs = plane.kubectl("get", "mutatingwebhookconfigurations", "-o", "name", check=False).stdout
        if "draq" in configs:
            print(f"\ndraq is running (operator + webhooks on 127.0.0.1:{port}, metrics on "
                  f"http://127.0.0.1:{metrics_port}/metrics); log: {log}", flush=True)
            return process
        time.sleep(0.3)
    process.terminate()
    raise DemoError(f"draq's webhook configurations did not appear within 60s; read {log}")


def _wait_for_crds(plane: Any, timeout: float = 60.0) -> None:
    """Wait until every CRD is served. `kubectl wait` fails at once on a CRD created so recently that it has
    no conditions yet, so it is asked again until the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        left = max(deadline - time.monotonic(), 1.0)
        result = plane.kubectl("wait", "--for=condition=Established", "crd", "--all", f"--timeout={left:.0f}s",
                               check=False, timeout=left + 10)
        if result.returncode == 0:
            return
        if time.monotonic() >= deadline:
            raise DemoError(f"the CRDs were not established within {timeout:.0f}s: {result.stderr.strip()}")
        time.sleep(0.3)


def _service_account_kubeconfig(plane: Any) -> Path:
    """draq runs as its own ServiceAccount, as in a cluster: its webhook lets only that identity remove
    the admission gate. Its rights are the Helm chart's, from the same rule files (charts/draq/files/rbac/)."""
    import json

    import yaml

    from admission.localcluster import rbac

    rights = rbac.Rights(frameworks=INTEGRATIONS)
    plane.kubectl("apply", "-f", "-",
                  input="\n---\n".join(json.dumps(m) for m in rbac.manifests("draq-system", rights=rights)))
    token = plane.kubectl("create", "token", "draq", "-n", "draq-system", "--duration=24h").stdout.strip()
    config = yaml.safe_load(plane.kubeconfig.read_text())
    config["users"] = [{"name": "user", "user": {"token": token}}]
    path = Path(plane.work_dir) / "draq.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def _submit_workloads(plane: Any) -> None:
    plane.kubectl("apply", "-f", str(DEMO_MANIFESTS / "queues.yaml"))
    for namespace in ("research", "serving"):
        plane.wait_for_service_account(namespace)
    for i, names in enumerate((FIRST_WORKLOADS, LATER_WORKLOADS)):
        time.sleep(2 * i)  # the later gang arrives second, so FIFO order is visible
        for name in names:
            result = plane.kubectl("apply", "-f", str(DEMO_MANIFESTS / name), check=False)
            print(f"\n$ kubectl apply -f examples/demo/{name}\n" + (result.stdout + result.stderr).strip(),
                  flush=True)


def _submit_topology_workloads(plane: Any) -> None:
    """The queues and Topology, then the pods that fragment the first rack, and once they run, the gang."""
    _apply(plane, TOPOLOGY_MANIFESTS / "queues.yaml")
    plane.wait_for_service_account("llm")
    _apply(plane, TOPOLOGY_MANIFESTS / "holders.yaml")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        phases = plane.kubectl("get", "pods", "-n", "llm", "-o", "jsonpath={.items[*].status.phase}",
                               check=False).stdout.split()
        if len(phases) == 6 and set(phases) == {"Running"}:
            break
        time.sleep(0.5)
    else:
        raise DemoError(f"the six inference pods of holders.yaml did not run within 60s; read {plane.logs_dir}")
    print(f"\nrack {TOPOLOGY_RACKS[0]} is fragmented: a GPU held on 6 of its 18 nodes", flush=True)
    _apply(plane, TOPOLOGY_MANIFESTS / "gang.yaml")


def _apply(plane: Any, path: Path) -> None:
    result = plane.kubectl("apply", "-f", str(path), check=False)
    print(f"\n$ kubectl apply -f {path.relative_to(REPO)}\n" + (result.stdout + result.stderr).strip(), flush=True)
    if result.returncode != 0:
        raise DemoError(f"kubectl apply -f {path} failed: {result.stderr.strip()}")


def _show_topology(plane: Any) -> None:
    """`draq topology` against the demo's cluster, as a user would run it."""
    argv = [sys.executable, "-m", "admission.cli.main", "topology", "--kubeconfig", str(plane.kubeconfig)]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    print("$ draq topology")
    print((result.stdout or result.stderr).rstrip() + "\n", flush=True)


def _show(plane: Any, elapsed: float) -> None:
    print(f"\n---------------- {elapsed:4.0f}s after submitting ----------------")
    views = [("clusterqueues", []), ("podgroups", ["-A"]),
             ("pods", ["-A", "-l", GROUP_LABEL, "-o",
                       "custom-columns=NAMESPACE:.metadata.namespace,POD:.metadata.name,"
                       f"GROUP:.metadata.labels.{_JSONPATH_GROUP_LABEL},"
                       "OWNER:.metadata.ownerReferences[0].name,"
                       "GATES:.spec.schedulingGates[*].name,"
                       "NODE:.spec.nodeName,PHASE:.status.phase"])]
    for kind, extra in views:
        result = plane.kubectl("get", kind, *extra, check=False)
        print(f"$ {shlex.join(['kubectl', 'get', kind, *extra])}")  # whole, so that it can be copied
        print((result.stdout or result.stderr).rstrip() + "\n", flush=True)
    waiting = plane.kubectl("get", "podgroups", "-A", "-o", "jsonpath={range .items[?(@.status.phase==\"Pending\")]}"
                            "{.metadata.namespace}/{.metadata.name}: {.status.message}{\"\\n\"}{end}", check=False)
    if waiting.stdout.strip():
        print("why groups wait:\n" + waiting.stdout.rstrip() + "\n", flush=True)


def _watch(plane: Any, once: bool, topology: bool = False) -> None:
    submitted = time.monotonic()

    def show() -> None:
        _show(plane, time.monotonic() - submitted)
        if topology:
            _show_topology(plane)

    if once:
        for at in TOPOLOGY_SNAPSHOTS_ONCE if topology else SNAPSHOTS_ONCE:
            time.sleep(max(0.0, submitted + at - time.monotonic()))
            show()
        return
    print(f"\nexport KUBECONFIG={plane.kubeconfig}   # kubectl get draq -A ; Ctrl-C stops everything")
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    while signal.sigtimedwait({signal.SIGINT, signal.SIGTERM}, 8) is None:
        show()


def _wait_for_interrupt(plane: Any) -> None:
    print(f"\nexport KUBECONFIG={plane.kubeconfig}   # then: kubectl get resourceslices")
    print("running until Ctrl-C ...", flush=True)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    signal.sigwait({signal.SIGINT, signal.SIGTERM})
