"""Mistyped queries: the benchmark's and vLLM's questions as a hurried person types them, respelled and not.

Usage (``make typos``)::

    .venv/bin/python benches/typos.py [--xrepo ../shared/xrepo] [--no-write]

``benches/typos.json`` holds misspelt forms made without sight of fastrag's respelling: every query
of the 41 repositories and every vLLM public and dev question by an error model of keyboard slips and
spelling mistakes (``generated``, ``vllm``), and 128 of the queries typed by hand with two to four
errors each (``by_hand``). Each form is searched on the same indexes in one process, twice: as
shipped (``Retriever.respell`` on) and searched as typed (off). The repositories' indexes are the
ones ``benches/xrepo.py`` builds (``make xrepo`` first); vLLM's is the project's index (``make index``).
Scores: the benchmark's NDCG@10 (mean over repositories, and over symbol queries), vLLM's recall@5.
Rewrites the ``## Mistyped queries`` section of ``benches/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from common import ROOT
from report import publish, say
from xrepo_run import INDEX_ROOT, XREPO, run_fastrag, shipped_search
from xrepo_score import TaskResult, load_repos, load_tasks

from fastrag.evaluation.datasets import ground_truth, load_dataset
from fastrag.evaluation.recall import evaluate
from fastrag.retrieval.retriever import Hit, Retriever, hits_to_sources
from fastrag.schemas import MinimalSearchResults

SECTION = "## Mistyped queries"
TYPOS = ROOT / "benches/typos.json"
DATASETS = ROOT / "data/datasets/AnsweredQuestions"
VLLM_INDEX = ROOT / "data/processed"
SETS = tuple(f"dataset_{kind}_{part}.json" for kind in ("docs", "code") for part in ("public", "dev"))
#: Whether the search respells: as shipped, and as typed.
MODES = {"respelled": True, "as typed": False}


def searcher(respell: bool) -> Callable[[Retriever, Sequence[str], int], list[list[Hit]]]:
    """The shipped search path with respelling on or off."""

    def search(retriever: Retriever, queries: Sequence[str], k: int) -> list[list[Hit]]:
        retriever.respell = respell
        return shipped_search(retriever, queries, k)

    return search


def xrepo_scores(results: Sequence[TaskResult]) -> dict[str, float]:
    """Mean NDCG@10 over repositories and over the symbol queries."""
    by_repo: dict[str, list[float]] = {}
    for r in results:
        by_repo.setdefault(r.task.repo, []).append(r.ndcg)
    symbol = [r.ndcg for r in results if r.task.category == "symbol"]
    return {
        "ndcg": statistics.mean(statistics.mean(v) for v in by_repo.values()),
        "symbol": statistics.mean(symbol) if symbol else float("nan"),
        "queries": float(len(results)),
    }


def run_xrepo(xrepo: Path, typos: dict[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """Each form of the benchmark's queries, respelled and as typed: NDCG@10 by :func:`xrepo_scores`."""
    repos = [r for r in load_repos(xrepo) if (INDEX_ROOT / r.name / "CURRENT").is_file()]
    tasks = load_tasks(xrepo, repos)
    forms: dict[str, dict[tuple[str, str], str]] = {"written": {(t.repo, t.query): t.query for t in tasks}}
    for name in ("generated", "by_hand"):
        forms[name] = {(repo, query): typo for repo, query, typo in typos[name]}
    forms["by_hand, as written"] = {(repo, query): query for repo, query, _ in typos["by_hand"]}
    out: dict[str, dict[str, dict[str, float]]] = {}
    for form, typed in forms.items():
        chosen = [dataclasses.replace(t, query=typed[t.repo, t.query]) for t in tasks if (t.repo, t.query) in typed]
        names = {t.repo for t in chosen}
        for mode, respell in MODES.items():
            results = run_fastrag([r for r in repos if r.name in names], tasks=chosen, search=searcher(respell))
            out.setdefault(form, {})[mode] = xrepo_scores(results)
            say(f"xrepo {form} {mode}: {out[form][mode]['ndcg']:.4f}")
    return out


def run_vllm(typos: dict[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """vLLM's public and dev questions as written and mistyped, respelled and as typed: recall@5 per set."""
    retriever = Retriever.open(VLLM_INDEX)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name in SETS:
        path = DATASETS / name
        truth = ground_truth(load_dataset(path), path)
        mistyped = typos["vllm"][name]
        for form, asked in (
            ("written", [q.question for q in truth]),
            ("generated", [mistyped[q.question] for q in truth]),
        ):
            for mode, respell in MODES.items():
                retriever.respell = respell
                hits = retriever.search_many(asked, 5)
                results = [
                    MinimalSearchResults(
                        question_id=q.question_id, question=q.question, retrieved_sources=hits_to_sources(h)
                    )
                    for q, h in zip(truth, hits)
                ]
                out.setdefault(form, {}).setdefault(mode, {})[name] = evaluate(results, truth).recall[5]
    return out


def report_text(xrepo: dict[str, dict[str, dict[str, float]]], vllm: dict[str, dict[str, dict[str, float]]]) -> str:
    """The section of ``benches/RESULTS.md``."""
    lines = [
        SECTION,
        "",
        (
            f"Written by `benches/typos.py` (`make typos`), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. "
            "The misspelt forms of `benches/typos.json` were made without sight of the respelling "
            "(`Bm25Index.respell`): an error model of keyboard slips and spelling mistakes for every query "
            "(*generated*: one error, two in about a quarter), and 128 of the benchmark's queries typed by hand "
            "with two to four errors (*by hand*). Same indexes, same process; *as typed* turns the respelling off."
        ),
        "",
        "| xrepo, NDCG@10 (symbol queries) | queries | respelled | as typed |",
        "|---|---|---|---|",
    ]
    for form, modes in xrepo.items():
        cells = [f"{modes[m]['ndcg']:.3f} ({modes[m]['symbol']:.3f})" for m in MODES]
        lines.append(f"| {form} | {int(modes['respelled']['queries'])} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "| vLLM, recall@5 | " + " | ".join(s.removeprefix("dataset_").removesuffix(".json") for s in SETS) + " |",
    ]
    lines.append("|---|" + "---|" * len(SETS))
    for form, modes in vllm.items():
        for mode in MODES:
            lines.append(f"| {form}, {mode} | " + " | ".join(f"{modes[mode][s]:.3f}" for s in SETS) + " |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--xrepo", type=Path, default=XREPO, help="the benchmark folder (default: ../shared/xrepo)")
    parser.add_argument("--no-write", dest="write", action="store_false", help="never rewrite benches/RESULTS.md")
    args = parser.parse_args(argv)
    typos = json.loads(TYPOS.read_text(encoding="utf-8"))
    xrepo = run_xrepo(args.xrepo, typos)
    vllm = run_vllm(typos)
    publish("typos", {"xrepo": xrepo, "vllm": vllm}, SECTION, report_text(xrepo, vllm), args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
