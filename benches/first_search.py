"""Time to first search on vLLM with vectors: when a search first answers during a cold ``index --vectors docs``,
against when the whole build (vectors included) ends, measured in the same runs.

Usage: ``.venv/bin/python benches/first_search.py [--runs 3] [--vectors docs] [--no-write]``

Each run indexes vLLM (``data/raw/vllm-0.10.1``) into a fresh folder under ``data/bench/first_search/`` (no
embedding cache: every vector is embedded) with ``python -m fastrag index``, as a user would. Meanwhile
the bench waits for the first publication (``CURRENT`` appears), then runs one ``python -m fastrag search``
in its own process, beside the build still embedding, and notes when it printed its hits. Before the
lexical generation was published first, the first search could only answer once the whole build had
ended: the full build is that time. Writes ``data/bench/results/first_search.json`` and the
``## Time to first search`` section of ``benches/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import CORPUS
from report import BENCH_DIR, header, loadavg, publish, say

from fastrag.indexing.generations import CURRENT_FILE, read_manifest

SECTION = "## Time to first search"
QUERY = "How do I load a LoRA adapter dynamically?"
POLL_S = 0.01


def one_run(work: Path, vectors: str) -> dict[str, Any]:
    """One cold build with a search as soon as the first generation is live: the seconds of each."""
    index_dir = work / "index"
    shutil.rmtree(index_dir, ignore_errors=True)
    cmd = [sys.executable, "-m", "fastrag", "index", "--repo_path", str(CORPUS), "--index_dir", str(index_dir)]
    started = time.perf_counter()
    build = subprocess.Popen([*cmd, "--vectors", vectors], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    while not (index_dir / CURRENT_FILE).exists():
        if build.poll() is not None:
            raise SystemExit(f"the build ended before publishing anything (exit {build.returncode})")
        time.sleep(POLL_S)
    published = time.perf_counter() - started
    first_gen = (index_dir / CURRENT_FILE).read_text().strip()
    search = subprocess.run(
        [sys.executable, "-m", "fastrag", "search", QUERY, "--index_dir", str(index_dir), "--k", "5"],
        capture_output=True,
        text=True,
        check=False,
    )
    answered = time.perf_counter() - started
    hits = sum(1 for line in search.stdout.splitlines() if line[:3].strip().rstrip(".").isdigit())
    output, _ = build.communicate()
    full = time.perf_counter() - started
    if build.returncode != 0 or search.returncode != 0 or not hits:
        raise SystemExit(f"a run failed: build {build.returncode}, search {search.returncode}, {hits} hits")
    live = index_dir / (index_dir / CURRENT_FILE).read_text().strip()
    manifest = read_manifest(live)
    first = read_manifest(index_dir / first_gen) if (index_dir / first_gen).is_dir() else {}
    say(f"published {published:.2f} s, first search answered {answered:.2f} s, full build {full:.2f} s")
    return {
        "published_s": published,
        "first_search_s": answered,
        "search_s": answered - published,
        "full_build_s": full,
        "hits": hits,
        "first_generation_vectors": int(first.get("vectors") or 0),
        "first_generation_pending": int(first.get("vectors_pending") or 0),
        "vectors": int(manifest.get("vectors") or 0),
        "chunks": int(manifest.get("chunks") or 0),
        "summary": output.strip().splitlines(),
    }


def measure(runs: int, vectors: str) -> dict[str, Any]:
    """``runs`` cold builds, one after the other."""
    work = BENCH_DIR / "first_search"
    work.mkdir(parents=True, exist_ok=True)
    before = loadavg()
    rounds = [one_run(work, vectors) for _ in range(runs)]
    shutil.rmtree(work, ignore_errors=True)
    return {"vectors_mode": vectors, "runs": rounds, "load_before": before, "load_after": loadavg()}


def render(figures: dict[str, Any]) -> str:
    """The ``## Time to first search`` section."""
    runs = figures["runs"]

    def med(key: str) -> float:
        return float(statistics.median(float(r[key]) for r in runs))

    last = runs[-1]
    rows = [
        f"| {i + 1} | {r['published_s']:.2f} s | {r['first_search_s']:.2f} s | {r['full_build_s']:.2f} s |"
        for i, r in enumerate(runs)
    ]
    return "\n".join(
        [
            SECTION,
            "",
            (
                f"A cold `fastrag index --vectors {figures['vectors_mode']}` of vLLM (no embedding cache) and one "
                "`fastrag search` in its own process as soon as the first generation is live, beside the build still "
                "embedding (`benches/first_search.py`; issue 46). Each row is one run; times from the start of "
                "`index`. Before the lexical generation was published first, a search could only answer after the "
                "full build."
            ),
            "",
            header(),
            f"- load average before: {figures['load_before']}; after: {figures['load_after']}",
            (
                f"- {last['chunks']} chunks; first generation: {last['first_generation_vectors']} vectors, "
                f"{last['first_generation_pending']} pending; last: {last['vectors']} vectors"
            ),
            "",
            "| run | lexical generation live | first search answered | full build (vectors live) |",
            "|---|---|---|---|",
            *rows,
            (
                f"| **median** | **{med('published_s'):.2f} s** | **{med('first_search_s'):.2f} s** | "
                f"**{med('full_build_s'):.2f} s** |"
            ),
            "",
            (
                f"The first search answers {med('full_build_s') - med('first_search_s'):.2f} s sooner (median), "
                f"ranking by words; its own process took {med('search_s'):.2f} s (start-up, loading the generation, "
                "the query) on cores the embedding shares. The vector stage adds a second publication: the lexical "
                "files are hard links into the next generation, which only gets the vector files and a new manifest."
            ),
            "",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--vectors", default="docs")
    parser.add_argument("--no-write", action="store_true", help="print the section, leave RESULTS.md alone")
    args = parser.parse_args()
    figures = measure(args.runs, args.vectors)
    publish("first_search", figures, SECTION, render(figures), write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
