"""recall@k, k = 1 … 10, of the three search modes (lexical, vector, hybrid) on both public sets.

Usage: ``.venv/bin/python benches/modes.py [--no-write]``

Indexes the vLLM corpus with the default parameters plus vectors (``index --vectors docs``) into
``data/bench/modes-index/`` — kept between runs, so its embedding cache spares a re-run the embedding (a
first run embeds the Markdown chunks: tens of seconds on 2 cores) — then searches the 100 docs and 100 code
questions in each mode (``Retriever.search_many``, k = 10) and scores every cut-off by the grading rule.
Writes ``data/bench/results/modes.json`` (the curves of ``benches/recall_modes.png``) and the
``## Recall@k by search mode`` section of ``benches/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from common import CORPUS, DISPLAY_ROOT, RESULTS, ROOT, SETS
from report import BENCH_DIR, header, loadavg, publish, say

from fastrag.config import MODES
from fastrag.evaluation.datasets import ground_truth, load_dataset
from fastrag.evaluation.recall import evaluate
from fastrag.indexing.builder import IndexParams, build_index
from fastrag.retrieval.retriever import Retriever, hits_to_sources
from fastrag.schemas import MinimalSearchResults

SECTION = "## Recall@k by search mode"
INDEX_DIR = BENCH_DIR / "modes-index"
KS = tuple(range(1, 11))
VECTORS = "docs"


def measure() -> dict[str, Any]:
    """Index with vectors (incrementally), then recall@1…10 and the search time of every mode and set."""
    load_before = loadavg()
    say(f"indexing {CORPUS.relative_to(ROOT)} with --vectors {VECTORS} into {INDEX_DIR.relative_to(ROOT)} ...")
    built = build_index(CORPUS, INDEX_DIR, IndexParams(embed=VECTORS), display_root=DISPLAY_ROOT, progress=False)
    retriever = Retriever.open(INDEX_DIR)
    recall: dict[str, dict[str, dict[str, float]]] = {}
    seconds: dict[str, dict[str, float]] = {}
    for mode in MODES:
        recall[mode], seconds[mode] = {}, {}
        for name, path in SETS.items():
            truth = ground_truth(load_dataset(path), path)
            started = time.perf_counter()
            hits = retriever.search_many([q.question for q in truth], max(KS), mode)
            seconds[mode][name] = time.perf_counter() - started
            results = [
                MinimalSearchResults(
                    question_id=q.question_id, question=q.question, retrieved_sources=hits_to_sources(h)
                )
                for q, h in zip(truth, hits)
            ]
            scores = evaluate(results, truth, KS).recall
            recall[mode][name] = {str(k): scores[k] for k in KS}
            say(f"  {mode} {name}: R@1 {scores[1]:.2f}, R@5 {scores[5]:.2f}, R@10 {scores[10]:.2f}")
    return {
        "recall": recall,
        "search_s": seconds,
        "index": {
            "up_to_date": built.up_to_date,
            "seconds": built.seconds,
            "chunks": built.chunks,
            "vectors": int(retriever.index.manifest.get("vectors", 0)),  # the report omits it when up to date
            "embedded": built.embedded,
            "embed_seconds": built.embed_seconds,
        },
        "questions": {name: len(load_dataset(path).rag_questions) for name, path in SETS.items()},
        "load_before": load_before,
        "load_after": loadavg(),
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
    }


def report(fig: dict[str, Any]) -> str:
    """The Markdown section: one row per mode and set, recall at every k."""
    ix = fig["index"]
    built = (
        f"index up to date ({ix['seconds']:.1f} s to check)"
        if ix["up_to_date"]
        else f"indexed in {ix['seconds']:.1f} s, {ix['embedded']} of {ix['vectors']} vectors embedded "
        f"({ix['embed_seconds']:.1f} s; the rest from the cache)"
    )
    lines = [
        SECTION,
        "",
        (
            "Written by `benches/modes.py` (re-run replaces this section; raw figures in "
            "`data/bench/results/modes.json`, plot `benches/recall_modes.png`)."
        ),
        "",
        header(),
        (
            f"- index: default parameters with `--vectors {VECTORS}`: {ix['chunks']} chunks, {ix['vectors']} "
            f"vectors; {built}"
        ),
        f"- load average before {fig['load_before']}, after {fig['load_after']}",
        "- recall by the grading rule (same file, IoU > 0.05), k = 10 spans retrieved per question",
        "",
        "| mode | set | " + " | ".join(f"R@{k}" for k in KS) + " | search s |",
        "|---|---|" + "---|" * len(KS) + "---|",
    ]
    for mode, sets in fig["recall"].items():
        for name, curve in sets.items():
            cells = " | ".join(f"{curve[str(k)]:.2f}" for k in KS)
            lines.append(
                f"| {mode} | {name} ({fig['questions'][name]}) | {cells} | {fig['search_s'][mode][name]:.2f} |"
            )
    lines += [
        "",
        (
            "Vector search only embeds Markdown/reST chunks (`--vectors docs`), so its code-set recall is what those "
            "chunks find; hybrid fuses it with BM25 (see docs/exercise.md, Retrieval method). `search s`: one "
            "`search_many` call for the whole set, the embedding model's first load included in the first vector call."
        ),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    """Measure, print, record."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-write", action="store_true", help=f"do not update {RESULTS.relative_to(ROOT)}")
    args = parser.parse_args()
    if not CORPUS.is_dir():
        print(f"modes.py: error: no corpus at {CORPUS.relative_to(ROOT)}: run `make data`", file=sys.stderr)
        sys.exit(1)
    fig = measure()
    publish("modes", fig, SECTION, report(fig), write=not args.no_write)


if __name__ == "__main__":
    main()
