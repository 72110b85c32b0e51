"""Shared fixtures of the pytest-benchmark runs in ``benches/`` (never collected by the normal test run).

The index of the vLLM corpus is built once per session into a temporary folder; every benchmark that ran
is written, at the end of the session, into ``benches/RESULTS.md`` under ``## Throughput (pytest-benchmark)``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from common import CORPUS, DISPLAY_ROOT, RESULTS, CpuMeter, machine, replace_section

from fastrag.indexing.builder import IndexParams, build_index

SECTION = "## Throughput (pytest-benchmark)"
#: The xrepo build folder holds other projects' trees (and their tests): never collected.
collect_ignore = ["_work"]


@dataclass(frozen=True, slots=True)
class Timing:
    """Summary of one benchmark, in seconds."""

    name: str
    what: str
    rounds: int
    min: float
    median: float
    mean: float


class BenchLog:
    """Collects the timings of the session's benchmarks."""

    def __init__(self) -> None:
        self.timings: list[Timing] = []

    def add(self, name: str, what: str, benchmark: Any) -> None:
        """Record ``benchmark``'s statistics (nothing when benchmarks are disabled)."""
        meta = getattr(benchmark, "stats", None)
        if meta is None:
            return
        s = meta.stats
        self.timings.append(Timing(name, what, int(s.rounds), float(s.min), float(s.median), float(s.mean)))


def _fmt(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _section(timings: list[Timing], foreign_cores: float) -> str:
    rows = [
        f"| {t.name} | {t.what} | {t.rounds} | {_fmt(t.min)} | {_fmt(t.median)} | {_fmt(t.mean)} |" for t in timings
    ]
    return "\n".join(
        [
            SECTION,
            "",
            (
                "Written by `benches/test_throughput.py` "
                "(`.venv/bin/python -m pytest benches/test_throughput.py --benchmark-only -q`; a re-run replaces "
                "this section with the benchmarks it ran)."
            ),
            "",
            machine(),
            (
                f"- load from other processes during the session: {foreign_cores:.2f} cores on average "
                f"(load average at the end {os.getloadavg()[0]:.2f}); absolute times move with it"
            ),
            "",
            "| benchmark | what | rounds | min | median | mean |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
        ]
    )


@pytest.fixture(scope="session")
def bench_log() -> Iterator[BenchLog]:
    """The session's timings; written into ``benches/RESULTS.md`` when the session ends."""
    log = BenchLog()
    meter = CpuMeter()
    yield log
    if log.timings:
        replace_section(RESULTS, SECTION, _section(log.timings, meter.foreign_cores()))


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The vLLM corpus (skips when it is not unpacked: run ``make data``)."""
    if not CORPUS.is_dir():
        pytest.skip(f"no corpus at {CORPUS}: run `make data`")
    return CORPUS


@pytest.fixture(scope="session")
def index_dir(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A default index of the corpus, built once for the session."""
    path = tmp_path_factory.mktemp("index")
    build_index(corpus, path, IndexParams(), display_root=DISPLAY_ROOT, progress=False)
    return path
