"""The benchmarks of the admission cycle still run against the code they measure: each prints its figures
for a tiny case. (They are scripts, not checked by mypy; a renamed field would otherwise surface only when
someone measures.)"""

from __future__ import annotations

import asyncio
import importlib
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture()
def admission_cycle(monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.syspath_prepend(str(BENCH))
    sys.modules.pop("bench_admission_cycle", None)
    return importlib.import_module("bench_admission_cycle")


def test_the_admission_cycle_benchmarks_run(admission_cycle: object, capsys: pytest.CaptureFixture[str]) -> None:
    admission_cycle.bench_cycle(4, 2, 8, 1)  # type: ignore[attr-defined]
    admission_cycle.bench_large_cycle(8, 2, 4, 8, 1)  # type: ignore[attr-defined]
    admission_cycle.bench_charging(4, 2, 8, 1)  # type: ignore[attr-defined]
    printed = capsys.readouterr().out
    assert printed.count("run_cycle") == 2 and printed.count("charge_group") == 2
    assert "admitted" in printed


@pytest.fixture()
def declared_shapes(monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.syspath_prepend(str(BENCH))
    sys.modules.pop("bench_declared_shapes", None)
    return importlib.import_module("bench_declared_shapes")


def test_the_declared_shape_benchmark_runs(declared_shapes: object, capsys: pytest.CaptureFixture[str]) -> None:
    declared_shapes.bench_shapes(4, 4, 8, 2, 1, declared=True)  # type: ignore[attr-defined]
    declared_shapes.bench_shapes(4, 4, 8, 2, 1, declared=False)  # type: ignore[attr-defined]
    declared, created = capsys.readouterr().out.splitlines()
    assert "2 admitted (32 GPUs)" in declared and "16 slots reserved" in declared
    assert "2 admitted (32 GPUs)" in created and "0 slots reserved" in created


def test_the_abuse_benchmark_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    sys.modules.pop("bench_abuse", None)
    bench = importlib.import_module("bench_abuse")
    bench.main(100, 1)
    printed = capsys.readouterr().out
    assert "team/train Admit" in printed and "92 BehindInQueue, 8 NeverAdmissible" in printed


@pytest.fixture()
def topology_bench(monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.syspath_prepend(str(BENCH))
    sys.modules.pop("bench_topology", None)
    return importlib.import_module("bench_topology")


def test_the_topology_benchmarks_run(topology_bench: object, capsys: pytest.CaptureFixture[str]) -> None:
    rack = topology_bench.RACK  # type: ignore[attr-defined]
    topology_bench.bench_gang(4, 3, 8, 2, rack, 1)  # type: ignore[attr-defined]
    topology_bench.bench_cycle(8, 4, 3, 8, 1)  # type: ignore[attr-defined]
    topology_bench.bench_fragmentation(4, 3, 8, 10, 1)  # type: ignore[attr-defined]
    printed = capsys.readouterr().out
    assert "placed in rack rack-00" in printed and "run_cycle: 8 topology-constrained groups" in printed
    assert "whole racks" in printed


def test_the_flooded_pass_benchmark_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    sys.modules.pop("bench_flooded_pass", None)
    bench = importlib.import_module("bench_flooded_pass")
    # Every tenant group is admitted in its pass and Running in the next (asserted there).
    measured = asyncio.run(bench.measure(20, 2, 2))
    assert len(measured["one tenant group admitted"]) == 2
    assert len(measured["the next (it is bound, Running)"]) == 2
    assert {"nothing changed read", "one tenant group admitted metrics"} <= measured.keys()
