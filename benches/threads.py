"""Parallel speed-up on this machine: 1 vs 2 threads (or worker processes) for each parallel stage of fastrag.

Usage: ``.venv/bin/python benches/threads.py [--rounds 2] [--batch 1000] [--no-write]``

These are the stages ``build_index`` and the search path run in parallel; a whole ``index`` is chunking, then
the BM25 build, then ~1 s of writing (its wall time against corpus size is in ``scaling.py``). On the vLLM
corpus with the default (lexical) parameters, side by side in ``--rounds`` rounds (the order of 1 and 2
alternating from round to round):

- **chunking**: ``fastrag.indexing.builder._chunk_files`` with ``workers`` 1 (in-process) and 2 (a process pool), the
  stage ``build_index`` runs in parallel in Python;
- **BM25 build**: ``Bm25Index.build`` of every chunk text (tokenizing included) in a fresh process whose rayon
  pool has ``RAYON_NUM_THREADS`` threads;
- **search_batch**: ``Bm25Index.search_batch`` of the 200 public questions repeated to ``--batch``, ``threads``
  1 and 2 (median of 5 calls per round).

Each speed-up is the best time at 1 divided by the best time at 2, both figures shown. Writes
``data/bench/results/threads.json`` and the ``## Threads and workers`` section of ``benches/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import CORPUS, DISPLAY_ROOT, RESULTS, ROOT, SETS, CpuMeter, lexical_params, read_corpus
from report import header, loadavg, publish, run_measured, say

from fastrag import _core
from fastrag.evaluation.datasets import load_dataset
from fastrag.indexing.builder import _chunk_files, build_index
from fastrag.indexing.corpus import walk

SECTION = "## Threads and workers"
THREADS = (1, 2)
#: ``search_batch`` calls per round and thread count (their median is the round's figure).
BATCH_CALLS = 5
STAGES = ("chunking", "BM25 build", "search_batch")


def probe(data: Path) -> dict[str, float]:
    """In this fresh process (``RAYON_NUM_THREADS`` set by the caller): time ``Bm25Index.build`` of the texts."""
    with data.open("rb") as f:
        texts: list[str] = pickle.load(f)
    started = time.perf_counter()
    index = _core.Bm25Index.build(texts)
    return {"seconds": time.perf_counter() - started, "docs": float(index.num_docs)}


def run_probe(data: Path, n: int) -> float:
    """:func:`probe` in a fresh interpreter whose rayon pool has ``n`` threads; seconds."""
    env = {**os.environ, "RAYON_NUM_THREADS": str(n)}
    run = run_measured([sys.executable, __file__, "--probe", "--data", str(data)], env=env)
    if run.returncode != 0:
        raise SystemExit(f"BM25 build probe with {n} threads failed:\n{run.stderr[-2000:]}")
    seconds: float = json.loads(run.stdout.strip().splitlines()[-1])["seconds"]
    return seconds


def measure(rounds: int, batch: int) -> dict[str, Any]:
    """Every stage at 1 and 2, ``rounds`` times; the raw seconds per stage and thread count."""
    meter = CpuMeter()
    load_before = loadavg()
    times: dict[str, dict[str, list[float]]] = {s: {str(n): [] for n in THREADS} for s in STAGES}
    params = lexical_params()
    entries, _ = walk(CORPUS)
    with tempfile.TemporaryDirectory(prefix="fastrag-threads-") as tmp:
        index_dir, data = Path(tmp) / "index", Path(tmp) / "texts.pkl"
        say(f"indexing {CORPUS.relative_to(ROOT)} ...")
        build_index(CORPUS, index_dir, params, display_root=DISPLAY_ROOT, progress=False)
        corpus, chunks, bm25, _ = read_corpus(index_dir, with_tokens=False)
        with data.open("wb") as f:
            pickle.dump(corpus.texts, f, protocol=pickle.HIGHEST_PROTOCOL)
        questions = [q.question for path in SETS.values() for q in load_dataset(path).rag_questions]
        queries = [questions[i % len(questions)] for i in range(batch)]
        for r in range(rounds):
            order = THREADS if r % 2 == 0 else THREADS[::-1]
            for n in order:
                say(f"round {r + 1}, {n} thread(s) ...")
                started = time.perf_counter()
                done = sum(1 for _ in _chunk_files(CORPUS, entries, params, False, n))
                times["chunking"][str(n)].append(time.perf_counter() - started)
                assert done == len(entries)
                times["BM25 build"][str(n)].append(run_probe(data, n))
                calls = []
                for _ in range(BATCH_CALLS):
                    started = time.perf_counter()
                    bm25.search_batch(queries, 10, threads=n)
                    calls.append(time.perf_counter() - started)
                times["search_batch"][str(n)].append(statistics.median(calls))
    return {
        "times_s": times,
        "rounds": rounds,
        "batch": batch,
        "files": len(entries),
        "chunks": len(chunks),
        "foreign_cores": meter.foreign_cores(),
        "load_before": load_before,
        "load_after": loadavg(),
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
    }


def _fmt(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def report(fig: dict[str, Any]) -> str:
    """The Markdown section."""
    what = {
        "chunking": f"`_chunk_files` of {fig['files']} files (`workers`)",
        "BM25 build": f"`Bm25Index.build` of {fig['chunks']} chunk texts (`RAYON_NUM_THREADS`)",
        "search_batch": f"`search_batch` of {fig['batch']} questions, k=10 (`threads`)",
    }
    lines = [
        SECTION,
        "",
        (
            "Written by `benches/threads.py` (re-run replaces this section; raw figures in "
            "`data/bench/results/threads.json`, plot `benches/threads.png`)."
        ),
        "",
        header(),
        (
            f"- {fig['rounds']} rounds, 1 and 2 alternating; load from other processes during the run: "
            f"{fig['foreign_cores']:.2f} of {os.cpu_count()} cores on average (load average before "
            f"{fig['load_before']}, after {fig['load_after']}): a second thread only helps when a core is free"
        ),
        "",
        "| stage | what | 1 (each round) | 2 (each round) | best 1 vs best 2 | speed-up |",
        "|---|---|---|---|---|---|",
    ]
    for stage in STAGES:
        one, two = fig["times_s"][stage]["1"], fig["times_s"][stage]["2"]
        lines.append(
            f"| {stage} | {what[stage]} | {' / '.join(map(_fmt, one))} | {' / '.join(map(_fmt, two))} "
            f"| {_fmt(min(one))} vs {_fmt(min(two))} | **{min(one) / min(two):.2f}×** |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    """Measure, print, record."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2, help="rounds of every measurement")
    parser.add_argument("--batch", type=int, default=1000, help="questions per search_batch call")
    parser.add_argument("--no-write", action="store_true", help=f"do not update {RESULTS.relative_to(ROOT)}")
    parser.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        print(json.dumps(probe(args.data)))
        return
    if not CORPUS.is_dir():
        print(f"threads.py: error: no corpus at {CORPUS.relative_to(ROOT)}: run `make data`", file=sys.stderr)
        sys.exit(1)
    if args.rounds < 1 or args.batch < 1:
        parser.error("--rounds and --batch must be at least 1")
    fig = measure(args.rounds, args.batch)
    publish("threads", fig, SECTION, report(fig), write=not args.no_write)


if __name__ == "__main__":
    main()
