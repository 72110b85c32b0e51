"""Freshness on vLLM: how long after a save an edited file's new text is searchable, with the watcher on.

Usage: ``.venv/bin/python benches/watch.py [--edits 20] [--no-write]``

Copies vLLM (``data/raw/vllm-0.10.1``) into ``data/bench/watch/`` and indexes it there (lexical: the
embedding of Markdown is not what a code edit waits for), starts :class:`fastrag.indexing.watch.Watcher`,
then ``--edits`` times appends a unique marker to a Python file and measures the time from the save to
the first moment a lexical search of the marker returns that file (the live generation, loaded as a
server loads it). Then a "checkout": 200 files rewritten at once, and the number of builds it cost.
Writes ``data/bench/results/watch.json`` and the ``## Freshness`` section of ``benches/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import string
import sys
import time
from pathlib import Path
from typing import Any

from common import CORPUS, RESULTS, ROOT, percentile
from report import BENCH_DIR, header, loadavg, publish, say

from fastrag.indexing.builder import IndexParams, build_index
from fastrag.indexing.generations import current_generation
from fastrag.indexing.watch import Watcher
from fastrag.retrieval.retriever import Retriever

SECTION = "## Freshness"
EDITED = "vllm/sampling_params.py"


def searchable(index_dir: Path, marker: str, seen: dict[str, Any]) -> bool:
    """Whether a lexical search for ``marker`` finds the edited file (a new generation is loaded once)."""
    gen = current_generation(index_dir)
    if gen is None:
        return False
    if seen.get("gen") != gen.name:
        seen["gen"], seen["retriever"] = gen.name, Retriever.open(index_dir)
    hits = seen["retriever"].search(marker, 1, "lexical")
    return bool(hits) and hits[0].file_path.endswith(EDITED)


def measure(edits: int) -> dict[str, Any]:
    """The edits and the checkout."""
    work = BENCH_DIR / "watch"
    shutil.rmtree(work, ignore_errors=True)
    repo, index_dir = work / "vllm", work / "index"
    shutil.copytree(CORPUS, repo, symlinks=True)
    params = IndexParams(embed="none")
    started = time.perf_counter()
    build_index(repo, index_dir, params, display_root="vllm", progress=False)
    cold = time.perf_counter() - started
    builds: list[float] = []
    watcher = Watcher.of_index(index_dir, on_build=lambda r, n: builds.append(getattr(r, "seconds", 0.0))).start()
    before = loadavg()
    latencies: list[float] = []
    seen: dict[str, Any] = {}
    try:
        time.sleep(0.5)
        target = repo / EDITED
        original = target.read_text()
        for i in range(edits):
            marker = "".join(random.choice(string.ascii_lowercase) for _ in range(16))  # one token, no parts
            saved = time.perf_counter()
            target.write_text(original + f"\n# {marker}\n")
            while not searchable(index_dir, marker, seen):
                time.sleep(0.01)
            latencies.append(time.perf_counter() - saved)
            say(f"edit {i + 1}: searchable after {latencies[-1]:.2f} s")
        time.sleep(1.0)
        first = watcher.builds
        files = sorted(p for p in (repo / "vllm").rglob("*.py"))[:200]
        for path in files:
            path.write_text(path.read_text() + "\n# checked out\n")
        while watcher.builds == first or watcher.status()["pending_count"] or watcher.building:
            time.sleep(0.05)
        time.sleep(1.0)
        checkout_builds = watcher.builds - first
    finally:
        watcher.stop()
    return {
        "cold_index_s": cold,
        "latencies_s": latencies,
        "build_s": builds,
        "checkout_files": len(files),
        "checkout_builds": checkout_builds,
        "load_before": before,
        "load_after": loadavg(),
    }


def render(figures: dict[str, Any]) -> str:
    """The ``## Freshness`` section."""
    lat = figures["latencies_s"]
    builds = figures["build_s"]
    return "\n".join(
        [
            SECTION,
            "",
            (
                "`Watcher` (`fastrag watch`, `mcp --watch`) on a copy of vLLM, lexical index (`benches/watch.py`): "
                "from saving an edit to a lexical search finding the new text in the live generation."
            ),
            "",
            header(),
            f"- load average before: {figures['load_before']}; after: {figures['load_after']}",
            "",
            "| what | figure |",
            "|---|---|",
            f"| cold index of the copy | {figures['cold_index_s']:.1f} s |",
            (
                f"| edit → searchable, p50 / p95 over {len(lat)} edits | {statistics.median(lat):.2f} s / "
                f"{percentile(lat, 95):.2f} s |"
            ),
            f"| one incremental build, median | {statistics.median(builds):.2f} s |",
            f"| a checkout of {figures['checkout_files']} files | {figures['checkout_builds']} incremental build(s) |",
            "",
            (
                "An incremental build re-chunks and tokenizes only the changed files (the others' BM25 documents are "
                "runs of the live generation's indexes, joined by the core), then rewrites the generation's tables: "
                "that, the watcher's 150 ms debounce and the reader's load of the new generation are what an edit "
                "waits for."
            ),
            "",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=20)
    parser.add_argument("--no-write", action="store_true", help="print the section, leave RESULTS.md alone")
    args = parser.parse_args()
    figures = measure(args.edits)
    publish("watch", figures, SECTION, render(figures), write=not args.no_write)
    say(f"see {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
