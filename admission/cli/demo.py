"""`draq demo`: the main job on a local default — a real control plane with simulated GPU nodes."""

from __future__ import annotations

import argparse
import shutil
import signal
import tempfile
import time
from pathlib import Path

from admission.core.errors import DraqError

HELP = "start a local control plane with simulated GPU nodes and show the cluster's devices"
DEFAULT_LAYOUT = "h100=2,a100=1,mi300x=1"


class DemoError(DraqError):
    pass


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", default=DEFAULT_LAYOUT,
                        help=f"simulated nodes per GPU profile (default {DEFAULT_LAYOUT}; "
                             "profiles: h100, a100, mi300x)")
    parser.add_argument("--partitions", action="store_true",
                        help="publish MIG/CPX partitions with shared counters (turns on the alpha DRA gates)")
    parser.add_argument("--kubernetes-version", default=None, help="1.35 (default) or 1.34")
    parser.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "draq-demo",
                        help="state, PKI and logs of the local control plane (default %(default)s)")
    parser.add_argument("--once", action="store_true",
                        help="show the cluster and stop, instead of running until Ctrl-C")


def parse_layout(text: str) -> dict[str, int]:
    from e2e import profiles

    layout: dict[str, int] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, _, count = item.partition("=")
        if name not in profiles.PROFILES or not count.isdigit():
            raise DemoError(f"--nodes: {item!r} is not PROFILE=COUNT with PROFILE one of "
                            + ", ".join(profiles.PROFILES))
        layout[name] = int(count)
    return layout


def run(args: argparse.Namespace) -> int:
    from e2e.build import BuildError
    from e2e.controlplane import ControlPlane, ControlPlaneError

    layout = parse_layout(args.nodes)
    if args.work_dir.exists():
        shutil.rmtree(args.work_dir)
    plane = ControlPlane(args.work_dir, version=args.kubernetes_version, alpha_dra=args.partitions)
    print(f"starting a local Kubernetes control plane in {args.work_dir} ...", flush=True)
    started = time.monotonic()
    try:
        plane.start(progress=True)
        print(f"control plane ready in {time.monotonic() - started:.1f}s", flush=True)
        _show_cluster(plane, layout, args.partitions)
        if not args.once:
            print(f"\nexport KUBECONFIG={plane.kubeconfig}   # then: kubectl get resourceslices")
            print("running until Ctrl-C ...", flush=True)
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
            signal.sigwait({signal.SIGINT, signal.SIGTERM})
    except (ControlPlaneError, BuildError) as err:
        raise DemoError(str(err)) from err
    finally:
        plane.stop()
    return 0


def _show_cluster(plane: object, layout: dict[str, int], partitions: bool) -> None:
    from admission.kube.inventory import format_device_table, list_resource_slices, summarise_slices
    from e2e.controlplane import ControlPlane
    from e2e.nodesim import NodeSimulator

    assert isinstance(plane, ControlPlane)
    api = plane.client()
    sim = NodeSimulator(api)
    sim.apply_device_classes()
    for profile, count in layout.items():
        for n in range(count):
            sim.add_node(f"{profile}-{n}", profile, partitions=partitions)
    print(f"\nsimulated nodes: {', '.join(f'{c} x {p}' for p, c in layout.items())}\n")
    print(format_device_table(summarise_slices(list_resource_slices(api))), flush=True)
