"""The ranker fitted on vLLM questions and benchmark repositories pooled, cross-validated by repository.

Usage: ``python benches/cv_repos.py [--index_dir data/processed] [--folds 5] [--reuse-index]
[--write-weights] [--no-write] [--tasks-json OUT]`` (``make cv``).

Two sources of questions train the precision stage's linear ranker
(:data:`fastrag.retrieval.precision.FEATURES`):

* the vLLM public and dev question sets (``benches/cv.py``: candidates of the vLLM index, a
  candidate positive when it finds a ground-truth span by the grading rule), in folds by question;
* the xrepo benchmark's repositories (``benches/xrepo_run.py``: each indexed with the shipped
  defaults; a candidate positive when it covers one of its task's targets by the benchmark's rule),
  in folds **by repository**: no repository has tasks on both sides of a fold.

Each is also asked as a person might type it, folded with it: a vLLM question as keywords
(:func:`keyword_form`), a benchmark query put as a question (:func:`asked_form`); both forms carry a share
of their source's half of the loss, and question forms never fitted on are scored beside them.

Fold ``f`` holds out the vLLM questions of fold ``f`` and the repositories of fold ``f`` together;
the weights are fitted on the rest, both sources weighing alike in the loss whatever their sizes.
*Out of fold* figures rank every question with weights that never saw it (nor, for a repository,
any task of its repository); *in sample* ones with weights fitted on all; *shipped* ones with the
package's ``ranker.json``. A repository's figure is NDCG@10 by the benchmark's rule, vLLM's is
recall@k; the candidates are BM25's, ranked through the retriever's own post-processing (nested
spans, duplicates, heading lines), as in ``benches/cv.py``. *Default mode* columns are the
retriever's own search in its default mode (fusion with vectors included) with the weights of the
fold that holds the question out.

``--write-weights`` writes the weights fitted on everything to the package's ``ranker.json``; ``--tasks-json``
writes every benchmark task's NDCG@10 in each column, to compare a class of queries between two runs.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from common import RESULTS, ROOT, machine, replace_section, write_text_atomic
from cv import (
    L2,
    SEED,
    STEPS,
    K,
    Question,
    Ranker,
    candidate_columns,
    collect,
    covering,
    docs_lead,
    fit,
    folds_of,
    found_share,
    full_mask,
    kind_rows,
    model_scores,
    recall,
    shipped_weights,
    write_weights,
)
from xrepo_run import INDEX_ROOT, TREES, XREPO, LineTable, build_indexes, run_fastrag, unpack_trees
from xrepo_score import Repo, Span, Task, covers, load_repos, load_tasks, ndcg_at_10, summarize

from fastrag.evaluation.datasets import ground_truth, load_dataset
from fastrag.evaluation.recall import RECALL_KS
from fastrag.indexing.sources import Sources
from fastrag.retrieval import precision
from fastrag.retrieval.evidence import asks_for_passage
from fastrag.retrieval.retriever import (
    Hit,
    Retriever,
    clean_query,
    distinct,
    nested_first,
)

SECTION = "## Cross-validation by repository"
#: The form of a vLLM question typed as a search: its words without question words and English function
#: words ("How do I load a LoRA adapter dynamically in vLLM?" -> "load LoRA adapter dynamically vLLM").
KEYWORDS = "keywords"
FUNCTION_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "of",
        "on",
        "or",
        "should",
        "that",
        "the",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "with",
        "would",
        "you",
        "your",
        "my",
    ]
)
#: The share of vLLM's half of the loss its questions' keyword forms carry (``--keyword-share``), and of the
#: repositories' half their tasks put as questions carry (``--asked-share``, :data:`ASKED_FORMS`). A person types a
#: need in either form; fitted on the written forms alone, the ranker learnt the benchmarks' forms rather than
#: their needs (benches/RESULTS.md, "Every form a person types"; 0.3 for the questions was measured and not kept:
#: "Questions weighed more in the fit").
KEYWORD_SHARE = 0.2
ASKED_SHARE = 0.2
#: A benchmark query put as a person asks it: the forms the ranker is fitted on, then forms it never sees,
#: scored to show how the fit carries to other wordings. A query that is already a description starting with
#: "how" is asked to be explained.
ASKED_FORMS = ("Where is the code for {}?", "How does {} work?")
UNSEEN_FORMS = ("What is {}?", "Which file implements {}?", "where can I find {}")


def keyword_form(question: str) -> str:
    """``question`` as a person types it into a search box (:data:`KEYWORDS`)."""
    return " ".join(w for w in re.findall(r"[\w.\-/']+", question) if w.lower() not in FUNCTION_WORDS)


def asked_form(query: str, form: str) -> str:
    """The benchmark ``query`` put as a question by ``form`` (one of :data:`ASKED_FORMS` or :data:`UNSEEN_FORMS`)."""
    if form.startswith("How does") and re.match(r"how\b", query, re.IGNORECASE):
        return f"Can you explain {query}?"
    if form.startswith("Which file") and re.match(r"how\b", query, re.IGNORECASE):
        query = query.split(None, 1)[-1]
    return form.format(query)


def keyword_forms(datasets: Sequence[Path]) -> dict[str, dict[str, str]]:
    """Set file name -> question id -> the question's keyword form, for :func:`cv.collect`."""
    return {
        p.name: {q.question_id: keyword_form(q.question) for q in ground_truth(load_dataset(p), p)} for p in datasets
    }


@dataclass(slots=True)
class RepoTask:
    """One benchmark task's candidates (chunk ids, features, whether each covers a target, and which targets each
    covers: ``covers``, one row per target) and the task."""

    task: Task
    ids: list[int]
    features: np.ndarray
    label: np.ndarray
    covers: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=bool))


class RepoIndex:
    """One benchmark repository's index and how its results become the benchmark's spans."""

    def __init__(self, index_dir: Path, tree: Path) -> None:
        self.retriever = Retriever.open(index_dir, models_dir=ROOT / "data/models")
        self.locate = Sources.of(self.retriever.index.manifest).locate
        self.tree = tree.resolve()
        self.table = LineTable()

    def spans(self, hits: Sequence[Hit]) -> list[Span]:
        """``hits`` as paths in the repository with 1-based inclusive lines."""
        out = []
        for hit in hits:
            path = self.locate(hit.file_path).resolve()
            out.append(Span(path.relative_to(self.tree).as_posix(), *self.table.lines(path, hit.start, hit.end)))
        return out


def open_indexes(repos: Sequence[Repo], reuse: bool) -> dict[str, RepoIndex]:
    """The benchmark repositories' indexes, built (or, with ``reuse``, kept when built by this build) by
    :func:`~xrepo_run.build_indexes`; a repository whose build failed is left out."""
    builds = build_indexes(repos, unpack_trees(repos), reuse=reuse)
    return {
        r.name: RepoIndex(builds[r.name].index_dir, TREES / r.name)
        for r in repos
        if builds[r.name].error is None and (builds[r.name].index_dir / "CURRENT").is_file()
    }


def collect_repos(tasks: Sequence[Task], indexes: dict[str, RepoIndex], depth: int = precision.DEPTH) -> list[RepoTask]:
    """Candidates (``depth`` BM25 ones) and features of every task whose repository has an index."""
    out: list[RepoTask] = []
    for name, index in indexes.items():
        mine = [t for t in tasks if t.repo == name]
        retriever = index.retriever
        texts = [clean_query(t.query) for t in mine]
        for task, text, ranked in zip(mine, texts, retriever.lexical.search_many(texts, depth)):
            ids = [cid for cid, _ in ranked]
            spans = index.spans([Hit(*retriever.index.chunks.span(cid), 0.0) for cid in ids])
            covered, label = covering(spans, task.targets, covers)
            out.append(RepoTask(task, ids, candidate_columns(retriever, text, ranked), label, covered))
    return out


def repo_ndcg(item: RepoTask, weights: Ranker, index: RepoIndex, pages: bool = True) -> float:
    """NDCG@10 of a task ranked by ``weights`` through the retriever's own post-processing (``pages``: as
    :meth:`~fastrag.retrieval.retriever.Retriever.weigh_files` takes it)."""
    if not item.ids:
        return 0.0
    chunks = index.retriever.index.chunks
    scores = model_scores(item.features, weights)
    order = sorted(range(len(item.ids)), key=lambda j: (-scores[j], item.ids[j]))
    ranked = nested_first([(item.ids[j], float(scores[j])) for j in order], chunks)
    decay = index.retriever.spread_of(item.task.query, docs_lead(item.features))
    ranked = index.retriever.weigh_files(ranked, item.task.query, decay, pages)
    hits = distinct((Hit(*chunks.span(cid), score) for cid, score in ranked), K)
    return ndcg_at_10(index.spans(hits), item.task)


#: Coordinate ascent of the benchmark's own metric after the listwise fit (:meth:`Pooled.ascend`): passes over
#: the weights, and the steps tried on each, as shares of the first-stage weight.
ASCENT_ROUNDS = 2
ASCENT_STEPS = (0.3, 0.1, -0.1, -0.3)
#: Whether the climb leaves a page's sections unspread, as search does (``Retriever.weigh_files``' ``pages``). It
#: does not: climbed with every file spread, the weights score .880 on the benchmark out of fold and vLLM code R@5
#: .956; climbed with pages unspread, .872 and .960 (benches/RESULTS.md, "A page's sections are not spread").
ASCENT_PAGES = False


def over_repos(tasks: Sequence[RepoTask], values: Sequence[float]) -> float:
    """The mean over repositories of each one's mean of ``values`` (one per task of ``tasks``): the
    benchmark's headline, every repository counting alike whatever its number of tasks."""
    by_repo: dict[str, list[float]] = {}
    for t, v in zip(tasks, values, strict=True):
        by_repo.setdefault(t.task.repo, []).append(v)
    return float(np.mean([np.mean(v) for v in by_repo.values()])) if by_repo else 0.0


def form_mean(
    items: Sequence[RepoTask], pick: Callable[[int], Ranker], pooled: Pooled, indexes: dict[str, RepoIndex]
) -> float:
    """:func:`over_repos` of ``items``' NDCG@10, each ranked with ``pick(its repository's fold)``."""
    return over_repos(items, [repo_ndcg(t, pick(pooled.repo_fold[t.task.repo]), indexes[t.task.repo]) for t in items])


def repo_mean(
    tasks: Sequence[RepoTask], weights: np.ndarray, indexes: dict[str, RepoIndex], pages: bool = True
) -> float:
    """:func:`over_repos` of the tasks' NDCG@10 ranked by ``weights`` (:func:`repo_ndcg`)."""
    return over_repos(tasks, [repo_ndcg(t, weights, indexes[t.task.repo], pages) for t in tasks])


@dataclass(slots=True)
class Pooled:
    """Both sources of questions with their folds: vLLM by question, repositories by repository."""

    questions: list[Question]
    tasks: list[RepoTask]
    question_fold: np.ndarray
    task_fold: np.ndarray
    repo_fold: dict[str, int]
    indexes: dict[str, RepoIndex]
    vllm: Retriever
    climb: bool = True
    keywords: list[Question] = field(default_factory=list)
    keyword_share: float = 0.0
    asked: list[RepoTask] = field(default_factory=list)
    asked_share: float = 0.0
    per_truth: bool = False
    _fitted: dict[int | None, np.ndarray] = field(default_factory=dict, repr=False)

    def training(self, fold: int | None) -> tuple[list[Question | RepoTask], list[float]]:
        """The questions outside ``fold`` (all for ``None``) and their loss shares: each source half; within
        vLLM's half its questions' keyword forms carry ``keyword_share`` (folded with their questions), within
        the repositories' half their tasks put as questions ``asked_share`` (folded with their repository)."""
        qs = [q for q, g in zip(self.questions, self.question_fold) if g != fold]
        ks = [q for q, g in zip(self.keywords, self.question_fold) if g != fold]
        ts = [t for t, g in zip(self.tasks, self.task_fold) if g != fold]
        xs = [t for t in self.asked if self.repo_fold[t.task.repo] != fold]
        typed = self.keyword_share if ks else 0.0
        asked = self.asked_share if xs else 0.0
        shares = [0.5 * (1 - typed) / max(1, len(qs))] * len(qs) + [0.5 * typed / max(1, len(ks))] * len(ks)
        shares += [0.5 * (1 - asked) / max(1, len(ts))] * len(ts) + [0.5 * asked / max(1, len(xs))] * len(xs)
        return [*qs, *ks, *ts, *xs], shares

    def ascend(self, weights: np.ndarray, chosen: Sequence[Question | RepoTask]) -> np.ndarray:
        """``weights`` climbed on the NDCG@10 of the repositories' tasks among ``chosen`` that are not put as
        direct questions: each non-zero weight of a candidate feature moved in turn, its product with the
        ``asks`` trait moved the other way (so that direct questions keep their weights), a step kept when it
        raises the tasks' mean over their repositories and keeps the recall@5 of the keyword forms of
        the vLLM questions among ``chosen`` (:data:`KEYWORDS`) from falling.

        The listwise loss rewards any covering candidate near the top; the benchmark counts each target once,
        at its first covering rank, after spreading and de-duplication. Climbing the metric itself, from the
        loss's optimum, fits what the loss cannot express. Direct questions are not climbed: climbing vLLM's
        recall the same way overfit its training questions (docs/retrieval.md).
        """
        tasks = [t for t in chosen if isinstance(t, RepoTask) and not self.asks_for_passage(t)]
        if not tasks:
            return weights
        typed = [q for q in chosen if isinstance(q, Question) and q.dataset.endswith(f"_{KEYWORDS}.json")]
        floor = self.typed_recall(typed, weights, ASCENT_PAGES)
        scale = float(abs(weights[0])) or 1.0
        asks = {c: j for j, c in enumerate(precision.COLUMNS) if c.endswith("*asks")}
        movable = [(i, asks[f"{c}*asks"]) for i, c in enumerate(precision.FEATURES) if i > 0 and weights[i] != 0]
        best_w: np.ndarray = weights.copy()
        best = repo_mean(tasks, weights, self.indexes, ASCENT_PAGES)
        for _ in range(ASCENT_ROUNDS):
            for i, j in movable:
                for step in ASCENT_STEPS:
                    trial = best_w.copy()
                    trial[i] += step * scale
                    trial[j] -= step * scale
                    value = repo_mean(tasks, trial, self.indexes, ASCENT_PAGES)
                    if value > best + 1e-9 and self.typed_recall(typed, trial, ASCENT_PAGES) >= floor - 1e-9:
                        best_w, best = trial, value
        return best_w

    def asks_for_passage(self, item: RepoTask) -> bool:
        """Whether the task's query asks for a passage (the ``asks`` trait of its columns)."""
        names_code = self.indexes[item.task.repo].retriever.names_code
        return asks_for_passage(item.task.query, docs_lead(item.features), names_code)

    def typed_recall(self, typed: Sequence[Question], weights: np.ndarray, pages: bool = True) -> float:
        """Mean recall@5 of the keyword forms ``typed`` under ``weights`` (1.0 for none; ``pages``: as
        :func:`repo_ndcg` takes it)."""
        return float(np.mean([recall(q, weights, self.vllm, pages=pages)[5] for q in typed])) if typed else 1.0

    def fitted(self, fold: int | None) -> np.ndarray:
        """Weights fitted on everything outside ``fold`` (computed once per fold), then climbed
        (:meth:`ascend`) on the training questions and tasks."""
        if fold in self._fitted:
            return self._fitted[fold]
        chosen, shares = self.training(fold)
        out = fit(chosen, full_mask(), shares, L2, STEPS, self.per_truth)
        if self.climb:
            out = self.ascend(out, chosen)
        self._fitted[fold] = out
        return out


#: The gradient-boosted trees measured beside the linear ranker (LightGBM's LambdaRank; ``--lambdamart``).
LAMBDAMART = {
    "objective": "lambdarank",
    "learning_rate": 0.05,
    "num_leaves": 15,
    "min_data_in_leaf": 50,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "feature_fraction": 0.8,
    "lambdarank_truncation_level": 20,
    "verbose": -1,
    "seed": SEED,
}
LAMBDAMART_ROUNDS = 300


def lambdamart(pooled: Pooled, fold: int | None) -> Ranker:
    """LightGBM's LambdaRank trees fitted on the questions and tasks outside ``fold`` as a :data:`Ranker`."""
    import lightgbm

    chosen, _ = pooled.training(fold)
    kept = [item for item in chosen if item.label.any()]
    data = lightgbm.Dataset(
        np.concatenate([item.features for item in kept]),
        np.concatenate([item.label for item in kept]).astype(np.int64),
        group=[len(item.ids) for item in kept],
    )
    model = lightgbm.train(LAMBDAMART, data, num_boost_round=LAMBDAMART_ROUNDS)

    def score(features: np.ndarray) -> np.ndarray:
        out: np.ndarray = np.asarray(model.predict(features), dtype=np.float64)
        return out

    return score


def repo_folds(names: Sequence[str], folds: int) -> dict[str, int]:
    """The fold of each repository: a fixed random permutation dealt round-robin."""
    fold = folds_of(len(names), folds)
    return {name: int(f) for name, f in zip(names, fold)}


def scores(
    pooled: Pooled, vllm: Retriever, indexes: dict[str, RepoIndex], pick: Callable[[int], Ranker]
) -> tuple[list[dict[int, float]], list[float]]:
    """Recall of every vLLM question and NDCG@10 of every task, each ranked with ``pick(its fold)``."""
    per_fold = {f: pick(f) for f in {*pooled.question_fold.tolist(), *pooled.task_fold.tolist()}}
    recalls = [recall(q, per_fold[int(g)], vllm) for q, g in zip(pooled.questions, pooled.question_fold)]
    ndcgs = [repo_ndcg(t, per_fold[int(g)], indexes[t.task.repo]) for t, g in zip(pooled.tasks, pooled.task_fold)]
    return recalls, ndcgs


def searched(
    pooled: Pooled, vllm: Retriever, indexes: dict[str, RepoIndex], folds: int, repos: Sequence[Repo], index_root: Path
) -> tuple[list[dict[int, float]], list[float]]:
    """The retriever's own default-mode search, each question with the weights of its held-out fold."""
    recalls: list[dict[int, float]] = [{} for _ in pooled.questions]
    ndcg: dict[tuple[str, str], float] = {}
    saved = vllm.precision.weights
    for f in range(folds):
        w = pooled.fitted(f)
        relative = list(w[1:] / w[0])
        rows = [i for i, g in enumerate(pooled.question_fold) if g == f]
        vllm.precision.set_weights(relative)
        for i, hits in zip(rows, vllm.search_many([pooled.questions[i].text for i in rows], K)):
            recalls[i] = {k: found_share(pooled.questions[i].truth, hits[:k]) for k in RECALL_KS}
        held = [r for r in repos if r.name in indexes and pooled.repo_fold[r.name] == f]

        def search(
            retriever: Retriever, queries: Sequence[str], k: int, relative: list[float] = relative
        ) -> list[list[Hit]]:
            retriever.precision.set_weights(relative)
            return retriever.search_many(queries, k)

        for result in run_fastrag(held, index_root, search=search):
            ndcg[(result.task.repo, result.task.query)] = result.ndcg
    vllm.precision.set_weights(saved)
    return recalls, [ndcg[(t.task.repo, t.task.query)] for t in pooled.tasks]


#: The spreads :func:`named_spread_grid` chooses among for keywords that name code (0.3: spread as other
#: keywords are; 1.0: not spread).
NAMED_SPREADS = (1.0, 0.8, 0.7, 0.5, 0.3)


def named_spread_grid(
    pooled: Pooled, typed: Sequence[Question], indexes: dict[str, RepoIndex], vllm: Retriever, folds: int
) -> tuple[str, float]:
    """The spread of a query not put as a direct question that names something in code
    (:data:`fastrag.retrieval.retriever.NAMED_SPREAD`), chosen fold by fold on the training part of the pooled
    objective it moves: the repositories' NDCG@10 as written (their half, less the asked forms' share) and
    the keyword forms of the vLLM questions, recall@5 of docs and code averaged (their share of vLLM's half;
    the questions as written are direct questions, which it leaves alone). The held-out repositories and
    questions are scored with the choice: a Markdown line, and the choice on everything."""
    retrievers = [vllm, *(index.retriever for index in indexes.values())]
    saved = [r.named_spread for r in retrievers]
    weights = {f: pooled.fitted(f) for f in range(folds)}
    ndcg: dict[float, list[float]] = {}
    at5: dict[float, list[float]] = {}
    for value in NAMED_SPREADS:
        for r in retrievers:
            r.named_spread = value
        ndcg[value] = [
            repo_ndcg(t, weights[int(g)], indexes[t.task.repo]) for t, g in zip(pooled.tasks, pooled.task_fold)
        ]
        at5[value] = [recall(q, weights[int(g)], vllm)[5] for q, g in zip(typed, pooled.question_fold)]
    for r, value in zip(retrievers, saved):
        r.named_spread = value
    kinds = {kind: set(kind_rows(list(typed), kind)) for kind in ("docs", "code")}

    def typed_mean(values: Sequence[float], rows: Sequence[int]) -> float:
        return float(np.mean([np.mean([values[i] for i in rows if i in kinds[k]]) for k in kinds]))

    def objective(value: float, tasks: Sequence[int], questions: Sequence[int]) -> float:
        written = over_repos([pooled.tasks[i] for i in tasks], [ndcg[value][i] for i in tasks])
        return 0.5 * (1.0 - ASKED_SHARE) * written + 0.5 * KEYWORD_SHARE * typed_mean(at5[value], questions)

    all_tasks, all_questions = range(len(pooled.tasks)), range(len(typed))
    held_ndcg, held_at5 = [0.0] * len(pooled.tasks), [0.0] * len(typed)
    chosen = []
    for f in range(folds):
        tasks = [i for i, g in enumerate(pooled.task_fold) if g != f]
        questions = [i for i, g in enumerate(pooled.question_fold) if g != f]
        best = max(NAMED_SPREADS, key=lambda v: (objective(v, tasks, questions), v))
        chosen.append(best)
        for i, g in enumerate(pooled.task_fold):
            if g == f:
                held_ndcg[i] = ndcg[best][i]
        for i, g in enumerate(pooled.question_fold):
            if g == f:
                held_at5[i] = at5[best][i]
    everything = max(NAMED_SPREADS, key=lambda v: (objective(v, all_tasks, all_questions), v))

    def cell(values_ndcg: Sequence[float], values_at5: Sequence[float]) -> str:
        docs, code = (np.mean([values_at5[i] for i in kinds[k]]) for k in ("docs", "code"))
        return f"{over_repos(pooled.tasks, values_ndcg):.3f} · {docs:.3f} / {code:.3f}"

    cells = "; ".join(f"{v}: {cell(ndcg[v], at5[v])}" for v in NAMED_SPREADS)
    line = (
        "Spread of a file's further spans for keywords that name something in code (out of fold; each cell:"
        " the benchmark's NDCG@10 as written · the vLLM keyword forms' docs / code R@5): "
        f"{cells}; chosen per fold on the training part of the pooled objective: {chosen}, held out with the"
        f" choice: {cell(held_ndcg, held_at5)}; on everything: {everything}."
    )
    return line, everything


#: The spreads :func:`spread_grid` chooses among (1.0: no spreading).
SPREADS = (1.0, 0.7, 0.5, 0.3)


def spread_grid(pooled: Pooled, indexes: dict[str, RepoIndex], folds: int) -> tuple[str, float]:
    """The spread (:data:`fastrag.retrieval.retriever.SPREAD`) chosen fold by fold on the training
    repositories' NDCG@10 (vLLM's questions are asked as full questions, which it leaves alone), and
    the held-out repositories scored with the choice: a Markdown line, and the choice on everything."""
    per: dict[float, list[float]] = {}
    saved = {name: index.retriever.spread for name, index in indexes.items()}
    weights = {f: pooled.fitted(f) for f in range(folds)}
    for value in SPREADS:
        for index in indexes.values():
            index.retriever.spread = value
        per[value] = [
            repo_ndcg(t, weights[int(g)], indexes[t.task.repo]) for t, g in zip(pooled.tasks, pooled.task_fold)
        ]
    for name, index in indexes.items():
        index.retriever.spread = saved[name]

    def mean_over(values: Sequence[float], rows: Sequence[int]) -> float:
        return over_repos([pooled.tasks[i] for i in rows], [values[i] for i in rows])

    held: list[float] = [0.0] * len(pooled.tasks)
    chosen = []
    for f in range(folds):
        train = [i for i, g in enumerate(pooled.task_fold) if g != f]
        best = max(SPREADS, key=lambda v: (mean_over(per[v], train), -abs(v - 0.5)))
        chosen.append(best)
        for i, g in enumerate(pooled.task_fold):
            if g == f:
                held[i] = per[best][i]
    everything = max(SPREADS, key=lambda v: (mean_over(per[v], range(len(pooled.tasks))), -abs(v - 0.5)))
    cells = ", ".join(f"{v}: {mean_over(per[v], range(len(pooled.tasks))):.3f}" for v in SPREADS)
    line = (
        f"Spread of a file's further spans for queries not asked as full questions, mean NDCG@10 over the"
        f" repositories ({cells}); chosen per fold on the training repositories: {chosen}, held-out"
        f" repositories scored with the choice: {mean_over(held, range(len(pooled.tasks))):.3f};"
        f" on everything: {everything}."
    )
    return line, everything


def vllm_rows(questions: list[Question], columns: dict[str, list[dict[int, float]]]) -> str:
    """Markdown rows of recall@1/3/5/10: each vLLM set, then pooled docs and code."""
    groups: dict[str, list[int]] = {}
    for i, q in enumerate(questions):
        groups.setdefault(q.dataset, []).append(i)
    for kind in ("docs", "code"):
        groups[f"pooled {kind}"] = kind_rows(questions, kind)
    lines = ["| vLLM questions | n | " + " | ".join(f"{c} R@1/3/5/10" for c in columns) + " |"]
    lines.append("|" + "---|" * (2 + len(columns)))
    for name, rows in groups.items():
        cells = [
            "/".join(f"{np.mean([per[i][k] for i in rows]):.3f}".lstrip("0") for k in RECALL_KS)
            for per in columns.values()
        ]
        lines.append(f"| {name} | {len(rows)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def repo_rows(tasks: list[RepoTask], columns: dict[str, list[float]]) -> str:
    """Markdown rows of mean NDCG@10: headline (mean over repositories), each language, each category."""
    from xrepo_score import TaskResult

    summaries = {
        c: summarize([TaskResult(t.task, v, (), ()) for t, v in zip(tasks, per)]) for c, per in columns.items()
    }
    first = next(iter(summaries.values()))
    lines = ["| repositories | " + " | ".join(f"{c} NDCG@10" for c in columns) + " |"]
    lines.append("|" + "---|" * (1 + len(columns)))
    lines.append(
        f"| **mean of {len(first.repos)} repositories** | "
        + " | ".join(f"**{s.mean:.3f}**" for s in summaries.values())
        + " |"
    )
    for lang in first.languages:
        lines.append(f"| {lang} | " + " | ".join(f"{s.languages[lang]:.3f}" for s in summaries.values()) + " |")
    for cat in first.categories:
        lines.append(
            f"| category: {cat} | " + " | ".join(f"{s.categories[cat]:.3f}" for s in summaries.values()) + " |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index_dir", type=Path, default=ROOT / "data/processed")
    parser.add_argument("--datasets", type=Path, default=ROOT / "data/datasets/AnsweredQuestions")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--reuse-index", action="store_true", help="keep the repositories' indexes built by this build")
    parser.add_argument("--write-weights", action="store_true", help="write the weights fitted on everything")
    parser.add_argument("--no-write", action="store_true", help="print only; leave benches/RESULTS.md alone")
    parser.add_argument("--no-climb", action="store_true", help="the listwise fit alone, without the ascent")
    parser.add_argument("--lambdamart", action="store_true", help="also LightGBM's LambdaRank trees out of fold")
    parser.add_argument("--tasks-json", type=Path, help="also write every benchmark task's NDCG@10 per column here")
    parser.add_argument("--per-truth", action="store_true", help="fit each truth's share of a question (cv.fit)")
    parser.add_argument(
        "--keyword-share",
        type=float,
        default=KEYWORD_SHARE,
        help="share of vLLM's half of the loss its keyword forms carry",
    )
    parser.add_argument(
        "--asked-share",
        type=float,
        default=ASKED_SHARE,
        help="share of the repositories' half of the loss their tasks put as questions carry",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    datasets = sorted(args.datasets.glob("*.json"))
    if not datasets or args.folds < 2:
        sys.exit(f"cv_repos: no question sets in {args.datasets}" if not datasets else "cv_repos: --folds must be >= 2")
    vllm = Retriever.open(args.index_dir)
    questions = collect(vllm, datasets)
    typed = collect(vllm, datasets, reworded=keyword_forms(datasets), form=KEYWORDS)
    assert [q.qid for q in typed] == [q.qid for q in questions], "a keyword form for every question, in order"
    repos = load_repos(XREPO)
    indexes = open_indexes(repos, args.reuse_index)
    tasks = collect_repos(load_tasks(XREPO, repos), indexes)
    forms = {
        form: collect_repos([replace(t.task, query=asked_form(t.task.query, form)) for t in tasks], indexes)
        for form in (*ASKED_FORMS, *UNSEEN_FORMS)
    }
    fold_of = repo_folds([r.name for r in repos], args.folds)
    pooled = Pooled(
        questions,
        tasks,
        folds_of(len(questions), args.folds),
        np.array([fold_of[t.task.repo] for t in tasks], dtype=np.int64),
        fold_of,
        indexes,
        vllm,
        climb=not args.no_climb,
        keywords=typed if args.keyword_share > 0 else [],
        keyword_share=args.keyword_share,
        asked=[t for form in ASKED_FORMS for t in forms[form]] if args.asked_share > 0 else [],
        asked_share=args.asked_share,
        per_truth=args.per_truth,
    )
    everything = pooled.fitted(None)
    shipped_w = shipped_weights()
    columns = {
        "shipped": scores(pooled, vllm, indexes, lambda f: shipped_w),
        "in sample": scores(pooled, vllm, indexes, lambda f: everything),
        "out of fold": scores(pooled, vllm, indexes, pooled.fitted),
    }
    if args.lambdamart:
        rankers = {f: lambdamart(pooled, f) for f in range(args.folds)}
        columns["LambdaMART, out of fold"] = scores(pooled, vllm, indexes, rankers.__getitem__)
    columns["default mode, out of fold"] = searched(pooled, vllm, indexes, args.folds, repos, INDEX_ROOT)
    if args.tasks_json is not None:
        per_task = [
            {"repo": t.task.repo, "category": t.task.category, "query": t.task.query}
            | {c: v[1][i] for c, v in columns.items()}
            for i, t in enumerate(tasks)
        ]
        write_text_atomic(args.tasks_json, json.dumps(per_task, indent=1) + "\n")
    typed_columns = {
        "shipped": [recall(q, shipped_w, vllm) for q in typed],
        "in sample": [recall(q, everything, vllm) for q in typed],
        "out of fold": [recall(q, pooled.fitted(int(g)), vllm) for q, g in zip(typed, pooled.question_fold)],
    }
    asked_columns = {
        "shipped": lambda f: shipped_w,
        "in sample": lambda f: everything,
        "out of fold": pooled.fitted,
    }
    asked_lines = ["| benchmark queries | " + " | ".join(f"{c} NDCG@10" for c in asked_columns) + " |"]
    asked_lines.append("|" + "---|" * (1 + len(asked_columns)))
    written = [f"{over_repos(tasks, columns[c][1]):.3f}" for c in asked_columns]  # scored above
    asked_lines.append("| as written | " + " | ".join(written) + " |")
    for form, items in forms.items():
        cells = [f"{form_mean(items, pick, pooled, indexes):.3f}" for pick in asked_columns.values()]
        label = f"`{form}`" + (" (fitted on)" if form in ASKED_FORMS else "")
        asked_lines.append(f"| {label} | " + " | ".join(cells) + " |")
    grid_line, _ = spread_grid(pooled, indexes, args.folds)
    named_line, _ = named_spread_grid(pooled, typed, indexes, vllm, args.folds)
    relative = everything / everything[0]
    weights_text = ", ".join(f"{c} {w:.3f}" for c, w in zip(precision.COLUMNS, relative) if w)
    body = (
        f"{SECTION}\n\n{machine()}\n\n"
        f"`python benches/cv_repos.py`: {len(questions)} vLLM questions ({', '.join(p.name for p in datasets)}) in "
        f"{args.folds} folds by question, pooled with {len(tasks)} tasks of {len(indexes)} benchmark repositories "
        f"(`../shared/xrepo`) in {args.folds} folds by repository (seed {SEED}); each source half of the loss. "
        f"Weights fitted on everything over `precision.COLUMNS` (the candidate features and their products with"
        f" the query's traits), relative to the first-stage score, zeros left out: {weights_text}.\n\n"
        f"{repo_rows(tasks, {c: v[1] for c, v in columns.items()})}\n\n"
        f"{vllm_rows(questions, {c: v[0] for c, v in columns.items()})}\n\n"
        f"The same vLLM questions typed as keywords (`keyword_form`: question words and English function words"
        f" dropped; {args.keyword_share} of vLLM's half of the loss, folded with their questions, guarding the"
        f" ascent when above 0):\n\n{vllm_rows(typed, typed_columns)}\n\n"
        f"The benchmark's queries put as questions (`asked_form`; {args.asked_share} of the repositories' half of"
        f" the loss on the forms marked fitted on, folded with their repository; the others never fitted on),"
        f" mean NDCG@10 over the repositories:\n\n" + "\n".join(asked_lines) + "\n\n"
        f"{grid_line}\n\n{named_line}\n"
    )
    print(body)
    if args.write_weights:
        objective = f"listwise softmax cross-entropy, each source half, L2 {L2}, Adam {STEPS} steps"
        if pooled.climb:
            objective += (
                f", then coordinate ascent of the repositories' NDCG@10 for queries not put as direct questions"
                f" ({ASCENT_ROUNDS} rounds)"
            )
        objective += "; "
        objective += "benches/cv_repos.py"
        fitted_on = [p.name for p in datasets] + [f"xrepo: {len(indexes)} repositories"]
        write_weights(relative, fitted_on, len(questions) + len(tasks), objective)
    if not args.no_write:
        replace_section(RESULTS, SECTION, body)
    print(f"cv_repos: {time.perf_counter() - started:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
