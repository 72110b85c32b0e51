"""The ``make bench`` run: step timings, the criterion table, and the helpers the bench scripts share.

Usage (what ``make bench`` does)::

    python benches/report.py start                      # note the start time and the load average
    python benches/report.py step NAME -- CMD [ARG ...]  # run one step, record its wall time and exit status
    python benches/report.py finish                     # write the criterion and run sections of RESULTS.md

``finish`` reads the criterion estimates that ``cargo bench`` wrote during this run
(``target/criterion/<group>/<bench>/new/``) and replaces two sections of ``benches/RESULTS.md``:
``## Native core (criterion)`` and ``## make bench``. The run log lives in ``data/bench/results/run.json``
(``data/`` is not committed). The helpers below (measured subprocesses, log-log fits, atomic JSON, the
toolchain line) are imported by ``scaling.py``, ``threads.py``, ``modes.py`` and ``plots.py``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import RESULTS, ROOT, machine, replace_section

from fastrag.indexing.storage import write_json_atomic

#: Generated data of the benches (corpora, indexes, raw figures); ignored by git with the rest of ``data/``.
BENCH_DIR = ROOT / "data/bench"
#: Raw figures of each bench script, read by ``plots.py``.
FIGURES_DIR = BENCH_DIR / "results"
RUN_LOG = FIGURES_DIR / "run.json"
CRITERION_DIR = ROOT / "target/criterion"
CRITERION_SECTION = "## Native core (criterion)"
RUN_SECTION = "## make bench"
#: The budget of one ``make bench`` run on 2 cores (issue 6, E1).
BUDGET_S = 15 * 60


# --------------------------------------------------------------------------- shared helpers


def save_figures(name: str, payload: Mapping[str, Any]) -> Path:
    """Write a bench's raw figures to ``data/bench/results/<name>.json`` atomically; return the path."""
    path = FIGURES_DIR / f"{name}.json"
    write_json_atomic(path, payload, indent=1)
    return path


def publish(name: str, payload: Mapping[str, Any], section: str, text: str, write: bool = True) -> Path:
    """The end of every bench script: save its raw figures (:func:`save_figures`), print its section
    ``text``, rewrite that section of ``benches/RESULTS.md`` unless ``write`` is false; return the
    figures' path."""
    path = save_figures(name, payload)
    print(text)
    if write:
        replace_section(RESULTS, section, text)
    wrote = f"; wrote {RESULTS.relative_to(ROOT)}" if write else ""
    say(f"figures in {path.relative_to(ROOT)}{wrote}")
    return path


def load_figures(name: str) -> dict[str, Any] | None:
    """The raw figures a bench saved with :func:`save_figures`, or ``None`` when it has not run."""
    path = FIGURES_DIR / f"{name}.json"
    if not path.is_file():
        return None
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def fit_exponent(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Growth exponent ``e`` of ``y ∝ x**e``: least-squares slope of ``log y`` against ``log x``.

    Needs at least two distinct positive ``x`` and positive ``y``; ``nan`` otherwise.
    """
    pairs = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y > 0]
    if len({p[0] for p in pairs}) < 2:
        return float("nan")
    mx = sum(p[0] for p in pairs) / len(pairs)
    my = sum(p[1] for p in pairs) / len(pairs)
    sxx = sum((p[0] - mx) ** 2 for p in pairs)
    sxy = sum((p[0] - mx) * (p[1] - my) for p in pairs)
    return sxy / sxx


def dir_bytes(path: Path) -> int:
    """Total size of the regular files under ``path`` (or of ``path`` itself when it is a file)."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


@dataclass(frozen=True, slots=True)
class Measured:
    """A finished subprocess: wall time, CPU time and peak RSS of it and its reaped children, exit status, output."""

    wall_s: float
    cpu_s: float
    peak_mb: float
    returncode: int
    stdout: str
    stderr: str


def run_measured(cmd: Sequence[str], env: Mapping[str, str] | None = None, cwd: Path = ROOT) -> Measured:
    """Run ``cmd`` and measure it with ``wait4``: wall time, CPU time (user + system, with the children it
    waited for) and ``ru_maxrss`` (the largest of the process and those children), output captured through
    files (no pipe to fill up)."""
    utf8 = "utf-8"  # the children's output, whatever the locale
    with (
        tempfile.TemporaryFile("w+", encoding=utf8, errors="replace") as out,
        tempfile.TemporaryFile("w+", encoding=utf8, errors="replace") as err,
    ):
        started = time.perf_counter()
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=err, cwd=cwd, env=dict(env) if env else None)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        cpu = usage.ru_utime + usage.ru_stime
        return Measured(wall, cpu, usage.ru_maxrss / 1024, proc.returncode, out.read(), err.read())


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages, e.g. ``2.10 / 1.80 / 1.50``."""
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def _version(pkg: str) -> str:
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def toolchain() -> str:
    """One Markdown line: rustc, criterion (from Cargo.lock), matplotlib, psutil and pytest-benchmark versions."""
    try:
        rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        rustc = "rustc (not found)"
    lock = ROOT / "Cargo.lock"
    found = re.search(r'name = "criterion"\nversion = "([^"]+)"', lock.read_text()) if lock.is_file() else None
    criterion = found.group(1) if found else "unknown"
    others = ", ".join(f"{p} {_version(p)}" for p in ("matplotlib", "psutil", "pytest-benchmark"))
    return f"- toolchain: {rustc}, criterion {criterion}; {others}"


def header() -> str:
    """Machine, date, versions and toolchain: the lines every generated section starts with."""
    return machine() + "\n" + toolchain()


def say(message: str) -> None:
    """Progress on stderr."""
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- criterion


@dataclass(frozen=True, slots=True)
class CriterionResult:
    """One criterion benchmark: its id, median and 95% interval (seconds), and bytes per iteration."""

    group: str
    name: str
    median_s: float
    low_s: float
    high_s: float
    bytes: int | None


def read_criterion(since: float, root: Path = CRITERION_DIR) -> list[CriterionResult]:
    """The criterion results written at or after the epoch time ``since``, in file order."""
    results: list[CriterionResult] = []
    for meta in sorted(root.glob("*/*/new/benchmark.json")):
        estimates = meta.with_name("estimates.json")
        if not estimates.is_file() or estimates.stat().st_mtime < since:
            continue
        info = json.loads(meta.read_text())
        median = json.loads(estimates.read_text())["median"]
        ci = median["confidence_interval"]
        throughput = info.get("throughput") or {}
        results.append(
            CriterionResult(
                info["group_id"],
                info["function_id"],
                median["point_estimate"] / 1e9,
                ci["lower_bound"] / 1e9,
                ci["upper_bound"] / 1e9,
                throughput.get("Bytes"),
            )
        )
    return results


def fmt_seconds(seconds: float) -> str:
    """A duration in the unit that suits it: ns, µs, ms or s."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}" if seconds / scale < 100 else f"{seconds / scale:.0f} {unit}"
    return f"{seconds * 1e9:.0f} ns"


#: Benchmarks compared side by side: a word in one's name, the word replacing it in the other's ("" = absent).
PAIRS = (
    ("exhaustive", "pruned"),
    ("1 thread", "2 threads"),
    ("no stemming", ""),
)


def _without(name: str, word: str) -> str:
    """``name`` with ``word`` taken out of its comma-separated parts."""
    return ", ".join(p for p in name.split(", ") if p != word)


def criterion_pairs(results: Sequence[CriterionResult]) -> list[str]:
    """One line per pair of benchmarks of one group whose names differ only by a :data:`PAIRS` word:
    both medians and their ratio (first / second: how many times faster the second is)."""
    by_id = {(r.group, r.name): r for r in results}
    lines: list[str] = []
    for r in results:
        for word, other_word in PAIRS:
            if word not in r.name.split(", "):
                continue
            other_name = r.name.replace(word, other_word) if other_word else _without(r.name, word)
            other = by_id.get((r.group, other_name))
            if other is None:
                continue
            first, second = (r, other) if other_word else (other, r)
            words = (word, other_word) if other_word else ("with stemming", word)
            base = _without(_without(r.name, word), other_word) if other_word else _without(r.name, word)
            lines.append(
                f"- {r.group}, {base}: {words[0]} {fmt_seconds(first.median_s)} vs {words[1]} "
                f"{fmt_seconds(second.median_s)} = **{first.median_s / second.median_s:.2f}×**"
            )
    return lines


def criterion_section(results: Sequence[CriterionResult], started: float) -> str:
    """The ``## Native core (criterion)`` section: a table of medians, then the side-by-side ratios."""
    lines = [
        CRITERION_SECTION,
        "",
        (
            "Written by `benches/report.py finish` from `cargo bench --bench core` (`benches/core.rs`) of the same "
            "`make bench` run. Corpus and queries: see the header of `benches/core.rs`."
        ),
        "",
        header(),
        (
            f"- run started {time.strftime('%Y-%m-%d %H:%M %Z', time.localtime(started))}; load average at the "
            f"end of the run {loadavg()}"
        ),
        "",
        "| group | benchmark | median | 95% interval | throughput |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        rate = f"{r.bytes / r.median_s / 2**20:.0f} MiB/s" if r.bytes else "—"
        lines.append(
            f"| {r.group} | {r.name} | {fmt_seconds(r.median_s)} | {fmt_seconds(r.low_s)} – {fmt_seconds(r.high_s)} "
            f"| {rate} |"
        )
    pairs = criterion_pairs(results)
    if pairs:
        lines += ["", "Side by side (medians of the same run; ratio = first / second, > 1: the second is faster):", "",
                  *pairs]  # fmt: skip
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- the run log


def _read_log() -> dict[str, Any]:
    if not RUN_LOG.is_file():
        raise SystemExit(f"no run log at {RUN_LOG.relative_to(ROOT)}: run `benches/report.py start` first")
    data: dict[str, Any] = json.loads(RUN_LOG.read_text())
    return data


def start() -> None:
    """Begin a run log: the start time and the load average before anything runs."""
    FIGURES_DIR.mkdir(parents=True, exist_ok=True)
    write_json_atomic(RUN_LOG, {"started": time.time(), "load_before": loadavg(), "steps": []}, indent=1)
    say(f"bench run started; load average {loadavg()}")


def step(name: str, cmd: Sequence[str]) -> int:
    """Run one step of the bench (output not captured), log its wall time and status; return its status."""
    if not cmd:
        raise SystemExit("report.py step: no command after --")
    log = _read_log()
    say(f"== {name}: {' '.join(cmd)}  (load average {loadavg()})")
    before = _children_cpu()
    started = time.perf_counter()
    try:
        status = subprocess.run(list(cmd), cwd=ROOT, check=False).returncode
    except OSError as exc:
        say(f"report.py: cannot run {cmd[0]}: {exc.strerror}")
        status = 127
    wall = time.perf_counter() - started
    cpu = _children_cpu() - before
    log["steps"].append({"name": name, "wall_s": wall, "cpu_s": cpu, "status": status, "load_after": loadavg()})
    write_json_atomic(RUN_LOG, log, indent=1)
    say(f"== {name}: {wall:.1f} s wall, {cpu:.1f} s CPU, exit status {status}")
    return status


def _children_cpu() -> float:
    """User + system CPU seconds of every descendant waited for so far (this process's children, theirs...)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_section(log: Mapping[str, Any], total_s: float, criterion_count: int) -> str:
    """The ``## make bench`` section: machine, versions, load, and the wall time of every step."""
    steps = log["steps"]
    failed = [s["name"] for s in steps if s["status"] != 0]
    verdict = "PASS" if total_s <= BUDGET_S and not failed else "FAIL"
    cpu_total = sum(s.get("cpu_s", 0.0) for s in steps)
    lines = [
        RUN_SECTION,
        "",
        (
            "Written by `benches/report.py finish` at the end of `make bench` (every step below ran in this order, in "
            "one invocation; each bench script rewrote its own section of this file)."
        ),
        "",
        header(),
        f"- Python {platform.python_version()} ({sys.executable.replace(str(ROOT) + '/', '')})",
        (
            f"- load average (1 / 5 / 15 min) before: {log['load_before']}; after: {loadavg()} — the machine's 2 cores "
            "are shared with other engineers' jobs, so absolute times are inflated; compare figures of one section"
        ),
        f"- criterion benchmarks recorded in this run: {criterion_count}",
        "",
        "| step | wall | CPU (user + system, all processes) | exit status | load average after |",
        "|---|---|---|---|---|",
        *(
            f"| {s['name']} | {s['wall_s']:.1f} s | {s.get('cpu_s', float('nan')):.1f} s | {s['status']} "
            f"| {s['load_after']} |"
            for s in steps
        ),
        f"| **total** (start → finish) | **{total_s:.0f} s** ({total_s / 60:.1f} min) | {cpu_total:.0f} s | | |",
        "",
        f"Budget (issue 6, E1): {total_s:.0f} s vs {BUDGET_S} s allowed: **{verdict}**"
        + (f" (failed steps: {', '.join(failed)})" if failed else ""),
    ]
    return "\n".join(lines) + "\n"


def finish() -> None:
    """Write the criterion section (if criterion ran in this run) and the run section."""
    log = _read_log()
    total = time.time() - float(log["started"])
    results = read_criterion(float(log["started"]))
    if results:
        replace_section(RESULTS, CRITERION_SECTION, criterion_section(results, float(log["started"])))
    else:
        say("no criterion result from this run: its section is left as it was")
    replace_section(RESULTS, RUN_SECTION, run_section(log, total, len(results)))
    log["finished"] = time.time()
    write_json_atomic(RUN_LOG, log, indent=1)
    say(f"bench run: {total:.0f} s in all; wrote {RESULTS.relative_to(ROOT)}")


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch ``start``, ``step NAME -- CMD`` and ``finish``."""
    args = list(sys.argv[1:] if argv is None else argv)
    cmd: list[str] = []
    if "--" in args:
        cut = args.index("--")
        args, cmd = args[:cut], args[cut + 1 :]
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("start", "step", "finish"))
    parser.add_argument("name", nargs="?", help="the step's name (step only)")
    ns = parser.parse_args(args)
    if ns.action == "start":
        start()
    elif ns.action == "finish":
        finish()
    else:
        if not ns.name:
            parser.error("step needs a NAME")
        return step(ns.name, cmd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
