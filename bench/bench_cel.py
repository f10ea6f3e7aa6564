"""Selector throughput over 10,000 devices of a few models, memoised and not, plus compile time.

Run: .venv/bin/python bench/bench_cel.py
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass

from admission.core.cel import Program, compile_selector
from admission.core.cel.selector import compile_selector as cached_compile
from admission.core.quantity import Quantity, parse_quantity
from admission.core.semver import parse_semver

SELECTOR = ('device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "H100" '
            '&& device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0')
DRIVER = "gpu.example.com"
MODELS = [("H100", "80Gi"), ("A100", "40Gi"), ("L4", "24Gi"), ("H100", "94Gi")]
RUNS = 7


@dataclass(frozen=True, slots=True)
class Device:
    driver: str
    attributes: Mapping[str, Mapping[str, object]]
    capacity: Mapping[str, Mapping[str, Quantity]]
    allow_multiple_allocations: bool = False


def devices(count: int) -> list[Device]:
    made = []
    for i in range(count):
        model, memory = MODELS[i % len(MODELS)]
        made.append(Device(
            DRIVER,
            {DRIVER: {"model": model, "index": i % 8, "driverVersion": parse_semver("1.2.3")}},
            {DRIVER: {"memory": parse_quantity(memory)}},
        ))
    return made


def rates(program: Program, pool: list[Device]) -> tuple[float, float]:
    """(median, best) evaluations per second over RUNS sweeps of the pool."""
    timings = []
    for _ in range(RUNS):
        start = time.perf_counter()
        for device in pool:
            program.evaluate(device)
        timings.append(time.perf_counter() - start)
    return len(pool) / statistics.median(timings), len(pool) / min(timings)


def compile_time() -> float:
    timings = []
    for n in range(200):
        cached_compile.cache_clear()
        start = time.perf_counter()
        compile_selector(SELECTOR + f" && {n} >= 0")
        timings.append(time.perf_counter() - start)
    return statistics.median(timings)


def main() -> None:
    pool = devices(10_000)
    program = compile_selector(SELECTOR)
    memoised = rates(program, pool)
    fresh = rates(program.without_memo(), pool)
    print(f"selector: {SELECTOR}")
    print(f"devices: {len(pool)}, models: {len(MODELS)}, median (best) of {RUNS} runs, load {os.getloadavg()[0]:.1f}")
    for label, (median, best) in (("(a) memoised", memoised), ("(b) not memoised", fresh)):
        print(f"{label + ':':18} {median:10,.0f} evaluations/s ({1e6 / median:.2f} µs each; best {best:,.0f}/s)")
    print(f"{'compile time:':18} {compile_time() * 1e6:10,.0f} µs per expression (median)")


if __name__ == "__main__":
    main()
