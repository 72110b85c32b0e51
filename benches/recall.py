"""Recall of retrieval configurations on the public sets, measured in one process.

Usage: ``python benches/recall.py [--target 2000 1200 ...] [--no-stopwords] [--k1 1.2] [--b 0.75]``

Each configuration is indexed from scratch into a temporary folder, then both public sets are
searched and scored by the grading rule. Prints one Markdown row per configuration.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from fastrag.evaluation.datasets import ground_truth, load_dataset
from fastrag.evaluation.recall import evaluate
from fastrag.indexing.builder import IndexParams, build_index
from fastrag.retrieval.retriever import Retriever, hits_to_sources
from fastrag.schemas import MinimalSearchResults

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "data/raw/vllm-0.10.1"
SETS = {s: ROOT / f"data/datasets/AnsweredQuestions/dataset_{s}_public.json" for s in ("docs", "code")}


def score(retriever: Retriever, k: int = 10) -> dict[str, dict[int, float]]:
    """recall@1/3/5/10 of ``retriever`` on both public sets."""
    out: dict[str, dict[int, float]] = {}
    for name, path in SETS.items():
        truth = ground_truth(load_dataset(path), path)
        hits = retriever.search_many([q.question for q in truth], k)
        results = [
            MinimalSearchResults(question_id=q.question_id, question=q.question, retrieved_sources=hits_to_sources(h))
            for q, h in zip(truth, hits)
        ]
        out[name] = evaluate(results, truth).recall
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--target", type=int, nargs="+", default=[2000])
    parser.add_argument("--max", type=int, default=2000)
    parser.add_argument("--k1", type=float, nargs="+", default=[1.2])
    parser.add_argument("--b", type=float, nargs="+", default=[0.75])
    parser.add_argument("--no-stopwords", action="store_true")
    parser.add_argument("--no-stem", action="store_true")
    parser.add_argument("--no-bridges", action="store_true")
    args = parser.parse_args()
    print("| target | k1 | b | stop | stem | bridges | docs R@1/3/5/10 | code R@1/3/5/10 | chunks | build s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for target in args.target:
        for k1 in args.k1:
            for b in args.b:
                params = IndexParams(
                    args.max, target, k1, b, not args.no_stopwords, not args.no_stem, not args.no_bridges
                )
                with tempfile.TemporaryDirectory() as tmp:
                    t0 = time.perf_counter()
                    report = build_index(CORPUS, Path(tmp), params, display_root="data/raw/vllm-0.10.1", progress=False)
                    built = time.perf_counter() - t0
                    recall = score(Retriever.open(Path(tmp)))
                cells = [" / ".join(f"{recall[s][k]:.2f}" for k in (1, 3, 5, 10)) for s in ("docs", "code")]
                print(
                    f"| {target} | {k1} | {b} | {params.stopwords} | {params.stem} | {params.bridges} "
                    f"| {cells[0]} | {cells[1]} "
                    f"| {report.chunks} | {built:.1f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
