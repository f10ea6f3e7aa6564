"""Selector throughput over 10,000 devices of a few models, memoised and not, plus compile time.

Run: .venv/bin/python bench/bench_cel.py
"""

from __future__ import annotations

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


def rate(program: Program, pool: list[Device]) -> float:
    timings = []
    for _ in range(RUNS):
        start = time.perf_counter()
        for device in pool:
            program.evaluate(device)
        timings.append(time.perf_counter() - start)
    return len(pool) / statistics.median(timings)


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
    memoised = rate(program, pool)
    fresh = rate(program.without_memo(), pool)
    print(f"selector: {SELECTOR}")
    print(f"devices: {len(pool)}, models: {len(MODELS)}, median of {RUNS} runs")
    print(f"(a) memoised:      {memoised:12,.0f} evaluations/s  ({1e6 / memoised:.2f} µs each)")
    print(f"(b) not memoised:  {fresh:12,.0f} evaluations/s  ({1e6 / fresh:.2f} µs each)")
    print(f"compile time:      {compile_time() * 1e6:12,.0f} µs per expression (median)")


if __name__ == "__main__":
    main()
