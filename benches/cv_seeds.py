"""The ranker's cross-validation by repository (``benches/cv_repos.py``) repeated over several draws of the folds.

Usage: ``python benches/cv_seeds.py --seeds 1,2 --json OUT.json [--bags 3] [--share 0.8] [--per-truth]`` runs the
fit of ``cv_repos.py`` (listwise fit, then the climb; the same sources, forms and shares) once per draw and writes every
benchmark task's and vLLM question's out-of-fold score to ``OUT.json``; ``python benches/cv_seeds.py --table A.json
B.json ...`` prints them side by side, with their mean, as a section of ``benches/RESULTS.md``.

A draw ``s`` deals the 41 repositories into the folds by a permutation from ``numpy.random.default_rng(s)``, then
the vLLM questions by the next permutation of the same generator; its repositories' folds are ``cv_repos.py``'s for
``s = 0``. Which repositories are held out together is chance, and with two repositories per language a language's
out-of-fold figure, like a class of queries', moves with the draw: one draw says little about them.

``--bags B`` fits each fold's weights ``B`` times, each on a share (``--share``) of the training repositories and
of the training questions drawn without replacement, and ranks with their mean (relative to the first-stage
weight): bagging, measured beside the single fit on the same draws. ``--per-truth`` fits the loss per truth
(:func:`cv.fit`): each of a question's truths that a candidate finds carries its share of the question.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from common import RESULTS, ROOT, replace_section, write_text_atomic
from cv import collect, dealt
from cv_repos import (
    ASKED_FORMS,
    ASKED_SHARE,
    KEYWORD_SHARE,
    KEYWORDS,
    Pooled,
    RepoTask,
    asked_form,
    collect_repos,
    keyword_forms,
    open_indexes,
    over_repos,
    scores,
)
from xrepo_run import XREPO
from xrepo_score import load_repos, load_tasks

from fastrag.retrieval.retriever import Retriever

SECTION = "## Cross-validation over draws of the folds"
FOLDS = 5


def draw(names: list[str], questions: int, seed: int) -> tuple[dict[str, int], np.ndarray]:
    """The fold of each repository and of each vLLM question in draw ``seed`` (the module docstring)."""
    rng = np.random.default_rng(seed)
    repo_fold = dealt(rng.permutation(len(names)), FOLDS)
    return {n: int(f) for n, f in zip(names, repo_fold)}, dealt(rng.permutation(questions), FOLDS)


def subsample(pooled: Pooled, fold: int, share: float, rng: np.random.Generator) -> Pooled:
    """``pooled`` cut to a ``share`` of the repositories and of the vLLM questions outside ``fold`` (each
    question's keyword form and each task's question forms follow it)."""
    repos = sorted({name for name, f in pooled.repo_fold.items() if f != fold})
    kept = set(rng.choice(repos, size=round(share * len(repos)), replace=False).tolist())
    outside = np.flatnonzero(pooled.question_fold != fold)
    rows = np.sort(rng.choice(outside, size=round(share * len(outside)), replace=False))
    tasks = [t for t in pooled.tasks if t.task.repo in kept]
    return Pooled(
        [pooled.questions[i] for i in rows],
        tasks,
        pooled.question_fold[rows],
        np.array([pooled.repo_fold[t.task.repo] for t in tasks], dtype=np.int64),
        pooled.repo_fold,
        pooled.indexes,
        pooled.vllm,
        keywords=[pooled.keywords[i] for i in rows],
        keyword_share=pooled.keyword_share,
        asked=[t for t in pooled.asked if t.task.repo in kept],
        asked_share=pooled.asked_share,
        per_truth=pooled.per_truth,
    )


def bagged(pooled: Pooled, fold: int, bags: int, share: float, seed: int) -> np.ndarray:
    """The mean of ``bags`` fits (:meth:`Pooled.fitted`) on subsamples of the training part of ``fold``, each
    relative to its first-stage weight."""
    fits = []
    for bag in range(bags):
        rng = np.random.default_rng(1000 * seed + 10 * fold + bag)
        weights = subsample(pooled, fold, share, rng).fitted(fold)
        fits.append(weights / weights[0])
    return np.asarray(np.mean(fits, axis=0))


def run(seeds: list[int], bags: int, share: float, per_truth: bool = False) -> list[dict[str, Any]]:
    """Every benchmark task's and vLLM question's out-of-fold score in each draw of ``seeds``."""
    datasets = sorted((ROOT / "data/datasets/AnsweredQuestions").glob("*.json"))
    vllm = Retriever.open(ROOT / "data/processed")
    questions = collect(vllm, datasets)
    typed = collect(vllm, datasets, reworded=keyword_forms(datasets), form=KEYWORDS)
    repos = load_repos(XREPO)
    indexes = open_indexes(repos, reuse=True)
    tasks = collect_repos(load_tasks(XREPO, repos), indexes)
    asked: list[RepoTask] = []
    for form in ASKED_FORMS:
        asked += collect_repos([replace(t.task, query=asked_form(t.task.query, form)) for t in tasks], indexes)
    out = []
    for seed in seeds:
        started = time.perf_counter()
        repo_fold, question_fold = draw([r.name for r in repos], len(questions), seed)
        pooled = Pooled(
            questions,
            tasks,
            question_fold,
            np.array([repo_fold[t.task.repo] for t in tasks], dtype=np.int64),
            repo_fold,
            indexes,
            vllm,
            keywords=typed,
            keyword_share=KEYWORD_SHARE,
            asked=asked,
            asked_share=ASKED_SHARE,
            per_truth=per_truth,
        )
        fits = {f: bagged(pooled, f, bags, share, seed) if bags else pooled.fitted(f) for f in range(FOLDS)}
        recalls, ndcgs = scores(pooled, vllm, indexes, fits.__getitem__)
        print(f"cv_seeds: draw {seed}: {over_repos(tasks, ndcgs):.4f} ({time.perf_counter() - started:.0f} s)")
        out.append(
            {
                "seed": seed,
                "bags": bags,
                "share": share,
                "per_truth": per_truth,
                "tasks": [{"repo": t.task.repo, "category": t.task.category, "ndcg": v} for t, v in zip(tasks, ndcgs)],
                "vllm": [{"dataset": q.dataset, "r5": r[5]} for q, r in zip(questions, recalls)],
            }
        )
    return out


def figures(run: dict[str, Any], languages: dict[str, str]) -> dict[str, float]:
    """One draw's headline figures: the benchmark's mean over repositories, each category's mean over its tasks,
    each language's mean over its repositories (``languages``: each repository's), and vLLM's pooled docs and
    code recall@5."""
    by_repo: dict[str, list[float]] = defaultdict(list)
    for t in run["tasks"]:
        by_repo[t["repo"]].append(t["ndcg"])
    repo_mean = {r: statistics.fmean(v) for r, v in by_repo.items()}
    out = {"the benchmark": statistics.fmean(repo_mean.values())}
    for category in ("architecture", "semantic", "symbol"):
        out[category] = statistics.fmean(t["ndcg"] for t in run["tasks"] if t["category"] == category)
    for kind in ("docs", "code"):
        out[f"vLLM {kind} R@5"] = statistics.fmean(q["r5"] for q in run["vllm"] if f"_{kind}_" in q["dataset"])
    by_language: dict[str, list[float]] = defaultdict(list)
    for repo, value in repo_mean.items():
        by_language[languages[repo]].append(value)
    out |= {language: statistics.fmean(v) for language, v in sorted(by_language.items())}
    return out


def table(runs: list[dict[str, Any]]) -> str:
    """The draws' figures side by side, a column each (``s`` its seed, ``bagged`` when fitted so), and their
    mean per fitting procedure."""
    languages = {r.name: r.language for r in load_repos(XREPO)}
    columns = {f"{r['seed']}{' bagged' if r.get('bags') else ''}": figures(r, languages) for r in runs}
    procedures: dict[str, list[dict[str, float]]] = defaultdict(list)
    for name, values in columns.items():
        procedures["mean, bagged" if name.endswith("bagged") else "mean"].append(values)
    means = {name: {k: statistics.fmean(v[k] for v in group) for k in group[0]} for name, group in procedures.items()}
    shown = columns | means
    rows = ["| out of fold | " + " | ".join(shown) + " |", "|" + "---|" * (len(shown) + 1)]
    for key in next(iter(shown.values())):
        rows.append(f"| {key} | " + " | ".join(f"{v[key]:.3f}" for v in shown.values()) + " |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2", help="the draws, comma-separated")
    parser.add_argument("--bags", type=int, default=0, help="fits averaged per fold (0: one fit, as shipped)")
    parser.add_argument("--share", type=float, default=0.8, help="share of the training part each bag is fitted on")
    parser.add_argument("--per-truth", action="store_true", help="fit each truth's share of a question (cv.fit)")
    parser.add_argument("--json", type=Path, help="write the draws' scores here")
    parser.add_argument("--table", type=Path, nargs="+", help="print these runs' figures side by side instead")
    parser.add_argument("--no-write", action="store_true", help="print only; leave benches/RESULTS.md alone")
    args = parser.parse_args()
    if args.table:
        try:
            loaded = [json.loads(path.read_text()) for path in args.table]
        except (OSError, ValueError) as exc:
            sys.exit(f"cv_seeds: cannot read the runs: {exc}")
        runs = [run for each in loaded for run in (each if isinstance(each, list) else [each])]
        body = f"{SECTION}\n\n`python benches/cv_seeds.py --table {' '.join(p.name for p in args.table)}`:\n\n"
        body += table(runs) + "\n"
        print(body)
        if not args.no_write:
            replace_section(RESULTS, SECTION, body)
        return
    if args.json is None:
        sys.exit("cv_seeds: --json OUT is needed to keep the runs (or --table to show some)")
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        sys.exit(f"cv_seeds: --seeds must be integers separated by commas, got {args.seeds!r}")
    if args.bags < 0 or not 0 < args.share <= 1:
        sys.exit("cv_seeds: --bags must be >= 0 and --share in (0, 1]")
    write_text_atomic(args.json, json.dumps(run(seeds, args.bags, args.share, args.per_truth)) + "\n")


if __name__ == "__main__":
    main()
