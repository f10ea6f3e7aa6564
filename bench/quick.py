"""The benchmarks' quick mode, for CI: each guarded figure against a reference workload timed in the same run.

A figure is the lowest CPU time of several repetitions of one workload (a scaled-down instance of a full
bench). Its *ratio* is that time over the lowest time of a fixed pure-Python workload (`reference_work`),
timed before every figure, so a slower or busier machine moves both. A figure fails only when its ratio is
more than LIMIT times the committed reference ratio (bench/quick_reference.json): a 3x regression.

    make bench-quick                                   # check; exit 1 on a regression
    PYTHONPATH=. .venv/bin/python bench/quick.py --write-reference   # measure 3 times, keep the highest ratios
    PYTHONPATH=. .venv/bin/python bench/quick.py --only cel,charge   # some figures only
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import bench_admission_cycle as cycle_bench
import bench_cel
import bench_cycle_setup
import bench_preemption
import bench_webhook
from bench_allocator import allocated_claims, claim
from inventory import cluster_manifests

from admission.core.allocator import Allocator, GangMember, Snapshot, place_gang
from admission.core.cel.selector import compile_selector
from admission.core.cycle import run_cycle
from admission.core.cycle.preemption import plan_preemptions
from admission.core.features import gates_for
from admission.core.models import parse_objects
from admission.core.quota import charge_group, device_selected
from admission.core.review import GatingPolicy, mutate, parse_review, render_response, validate
from admission.operator.reading import CacheReader

REFERENCE_FILE = Path(__file__).with_name("quick_reference.json")
LIMIT = 3.0  # fail on a ratio more than this many times the reference ratio
REPETITIONS = 7
GATES = gates_for("1.35")


@dataclass(frozen=True, slots=True)
class Figure:
    name: str
    what: str
    # Builds the inputs (not timed) for the given number of calls; returns the timed call.
    prepare: Callable[[int], Callable[[], object]]


def reference_work() -> int:
    """A fixed pure-Python workload of the kind the guarded code does (string formatting, dict lookups and
    updates, integer arithmetic, a sort): about 10 ms of CPU on the machine the reference ratios were taken on."""
    table: dict[str, int] = {}
    total = 0
    for i in range(20000):
        key = f"node-{i % 512:05d}/gpu-{i % 8}"
        table[key] = table.get(key, 0) + i
        total += len(key) + (i * 7) % 13
    for value in sorted(table.values()):
        total ^= value
    return total


def lowest_cpu(call: Callable[[], object], repetitions: int) -> float:
    """The lowest CPU seconds of `repetitions` calls (after one warm-up call: `repetitions` + 1 in all)."""
    call()
    best = float("inf")
    for _ in range(repetitions):
        gc.collect()
        start = time.process_time()
        call()
        best = min(best, time.process_time() - start)
    return best


# ----- the guarded workloads ------------------------------------------------------------------------

def cel_evaluations(_runs: int) -> Callable[[], object]:
    program = compile_selector(bench_cel.SELECTOR).without_memo()
    pool = bench_cel.devices(2000)
    return lambda: [program.evaluate(d) for d in pool]


def half_full(nodes: int) -> Snapshot:
    return Snapshot.from_models(parse_objects(cluster_manifests(nodes, 8) + allocated_claims(nodes // 2, 8)))


def first_fit(_runs: int) -> Callable[[], object]:
    snapshot = half_full(256)
    allocator = Allocator(snapshot, GATES)
    nodes = sorted(snapshot.nodes)
    one = claim("one", 1)

    def run() -> None:
        for _ in range(5):
            fits = next(node for node in nodes if allocator.allocate(node, [one]).allocatable)
            assert fits == "node-00128", fits
    return run


def cold_full_nodes(runs: int) -> Callable[[], object]:
    """An 8-GPU claim on 128 full nodes whose views are not built: one new snapshot per run, made beforehand."""
    models = parse_objects(cluster_manifests(128, 8) + allocated_claims(128, 8))
    eight = claim("eight", 8)
    fresh = [Allocator(Snapshot.from_models(models), GATES) for _ in range(runs)]

    def run() -> None:
        allocator = fresh.pop()
        for node in allocator.snapshot.nodes:
            assert not allocator.allocate(node, [eight]).allocatable
    return run


def gang(_runs: int) -> Callable[[], object]:
    snapshot = Snapshot.from_models(parse_objects(cluster_manifests(128, 8)))

    def run() -> None:
        members = [GangMember(f"bench/pod-{i}", (claim(f"pod-{i}-gpus", 8),)) for i in range(16)]
        plan = place_gang(Allocator(snapshot, GATES), members)
        assert plan.feasible
    return run


def admission_cycle(_runs: int) -> Callable[[], object]:
    cycle = cycle_bench.large_cycle_input(250, 10, 128, 8)
    run_cycle(cycle)  # node views and selector results, as a kept snapshot has them
    return lambda: run_cycle(cycle)


def charge(_runs: int) -> Callable[[], object]:
    objects, inventory, plan = cycle_bench.charging_case(64, 128, 8)
    units = cycle_bench.charging_units()
    return lambda: charge_group(objects, units, inventory, device_selected, plan)


def cycle_setup(_runs: int) -> Callable[[], object]:
    nodes, pods = 1000, 4000
    cache = bench_cycle_setup.fill(nodes, pods)
    reader = CacheReader(cache, GATES)
    bench_cycle_setup.setup(reader)
    counter = iter(range(10**9))

    def run() -> float:
        index = next(counter)
        cache.put(bench_cycle_setup.bound_pod(index % pods, f"node-{(index * 7) % nodes:05d}", 0))
        return bench_cycle_setup.setup(reader)
    return run


def victim_search(_runs: int) -> Callable[[], object]:
    cycle = bench_preemption.scenario(20260301)
    result = run_cycle(cycle)
    return lambda: plan_preemptions(cycle, result)


def webhook_review(_runs: int) -> Callable[[], object]:
    policy = GatingPolicy()
    lookups = bench_webhook.StaticLookups()
    bodies = bench_webhook.bodies(300)

    def run() -> None:
        for path, body in bodies:
            review = parse_review(json.loads(body))
            decision = (mutate if path == "/mutate" else validate)(review, lookups, policy)
            render_response(review.uid, decision)
    return run



FIGURES = (
    Figure("cel", "2,000 selector evaluations (compiled once)", cel_evaluations),
    Figure("first-fit", "5 first fits of a 1-GPU claim past 128 full nodes of 256 x 8 GPUs (warm views)", first_fit),
    Figure("cold-full", "an 8-GPU claim on 128 full nodes whose views are not built (new snapshot)",
           cold_full_nodes),
    Figure("gang", "a 16-pod x 8-GPU gang placed on 128 free nodes x 8 GPUs", gang),
    Figure("cycle", "run_cycle, 250 groups in 10 ClusterQueues, 128 nodes x 8 GPUs, half full", admission_cycle),
    Figure("charge", "charge_group, 64 pods x one 2-GPU claim, 4 units, exact plan", charge),
    Figure("setup", "per-cycle set-up, one pod changed, 1,000 nodes x 8 GPUs and 4,000 pods", cycle_setup),
    Figure("victims", "victim search for a 32-pod gang over 2,000 admitted groups on 512 x 8 GPUs",
           victim_search),
    Figure("webhook", "300 webhook reviews decided in process (parse, decide, render)", webhook_review),
)


# ----- measuring and checking -----------------------------------------------------------------------

def measure(figure: Figure, repetitions: int) -> tuple[float, float]:
    """(figure seconds, reference seconds), each the lowest CPU time of `repetitions`."""
    call = figure.prepare(repetitions + 1)
    figure_s = lowest_cpu(call, repetitions)
    reference_s = lowest_cpu(reference_work, repetitions)
    return figure_s, reference_s


def load_reference() -> dict[str, float]:
    if not REFERENCE_FILE.exists():
        return {}
    found: dict[str, float] = json.loads(REFERENCE_FILE.read_text())["ratios"]
    return found


def check(figures: list[Figure], repetitions: int) -> int:
    reference = load_reference()
    failed = []
    print(f"quick benchmarks: lowest CPU time of {repetitions} runs each; ratio = figure / reference workload "
          f"(timed in the same run); fails above {LIMIT:g} x the committed ratio; load {os.getloadavg()[0]:.2f}")
    for figure in figures:
        figure_s, reference_s = measure(figure, repetitions)
        ratio = figure_s / reference_s
        committed = reference.get(figure.name)
        if committed is None:
            verdict, limit = "NO REFERENCE (run --write-reference)", "-"
            failed.append(figure.name)
        else:
            limit = f"{LIMIT * committed:.2f}"
            verdict = "ok" if ratio <= LIMIT * committed else "REGRESSION"
            if verdict != "ok":
                failed.append(figure.name)
        shown = "-" if committed is None else f"{committed:.2f}"
        print(f"  {figure.name:10} {figure_s * 1000:9.2f} ms  reference {reference_s * 1000:6.2f} ms  "
              f"ratio {ratio:8.2f}  committed {shown:>8}  limit {limit:>8}  {verdict}  ({figure.what})",
              flush=True)
    if failed:
        print(f"quick benchmarks FAILED: {', '.join(failed)}")
        return 1
    print("quick benchmarks passed")
    return 0


def write_reference(figures: list[Figure], repetitions: int, rounds: int) -> None:
    """The highest ratio of `rounds` measurements per figure (a conservative reference), merged into the file."""
    ratios = load_reference()
    for figure in figures:
        highest = 0.0
        for _ in range(rounds):
            figure_s, reference_s = measure(figure, repetitions)
            highest = max(highest, figure_s / reference_s)
        ratios[figure.name] = round(highest, 3)
        print(f"  {figure.name:10} ratio {highest:.2f}", flush=True)
    document = {"about": "Reference ratios for bench/quick.py (figure CPU time / reference workload CPU time); "
                         "refresh with bench/quick.py --write-reference",
                "machine": f"{os.cpu_count()} cores, Python {sys.version.split()[0]}",
                "date": time.strftime("%Y-%m-%d"), "ratios": dict(sorted(ratios.items()))}
    REFERENCE_FILE.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {REFERENCE_FILE}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--only", default="", help="comma-separated figure names (default: all)")
    parser.add_argument("--repetitions", type=int, default=REPETITIONS)
    parser.add_argument("--write-reference", action="store_true", help="measure and write the reference ratios")
    parser.add_argument("--rounds", type=int, default=3, help="measurements per figure with --write-reference")
    args = parser.parse_args()
    wanted = {n for n in args.only.split(",") if n}
    unknown = wanted - {f.name for f in FIGURES}
    if unknown:
        parser.error(f"unknown figure(s) {', '.join(sorted(unknown))}; known: {', '.join(f.name for f in FIGURES)}")
    if args.repetitions < 1:
        parser.error("--repetitions must be at least 1")
    figures = [f for f in FIGURES if not wanted or f.name in wanted]
    started = time.perf_counter()
    if args.write_reference:
        write_reference(figures, args.repetitions, args.rounds)
        code = 0
    else:
        code = check(figures, args.repetitions)
    print(f"took {time.perf_counter() - started:.0f} s")
    return code


if __name__ == "__main__":
    sys.exit(main())
