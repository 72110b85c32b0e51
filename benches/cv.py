"""Honest tuning: pooled question sets, k-fold cross-validation by question (``make cv``).

Usage: ``python benches/cv.py [--index_dir data/processed] [--datasets data/datasets/AnsweredQuestions]
[--folds 5] [--index-ablation] [--grid] [--no-write]``

Every answered question set in ``--datasets`` (the public and the dev sets) is pooled and split
into ``--folds`` folds by question (a fixed seed). The precision stage's weights
(:data:`fastrag.retrieval.precision.FEATURES`) are fitted on all folds but one and the held-out
fold is ranked with them: its recall is *out of fold*. The *in-sample* figures rank every question
with weights fitted on all of them; the *shipped* figures use the weights in the package. A
choice that gains in sample and not out of fold is fitted to the questions, not to the task.

The fit is listwise: for each question, a softmax over its candidates' linear scores, the loss
being minus the log of the probability mass of the candidates that find its ground truth by the
grading rule (same file, IoU > 0.05), with a little L2. Candidates, features and the ranking
after them (nested spans, duplicates, heading lines) are the retriever's own code, so the bench
measures exactly what ``search_dataset`` returns.

Rows of the ablation are parts of retrieval without a fitted parameter, switched off one at a
time, with the weights refitted out of fold: a part stays only while it earns at least +0.01
pooled recall@5 out of fold.

``--grid`` also selects every discrete tunable (BM25 k1/b, section text under heading lines, chunk
target size, candidate depth, the vector fusion's weight, floor, depth and RRF constant) fold by
fold and scores the held-out fold with the choice (``benches/cv_grid.py``).

The shipped weights are fitted on these questions pooled with the benchmark repositories
(``benches/cv_repos.py --write-weights``). The tables replace the
``## Cross-validation`` section of ``benches/RESULTS.md`` unless ``--no-write``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

import numpy as np
from common import RESULTS, ROOT, machine, replace_section, shown, write_text_atomic
from paraphrased import PARAPHRASES, paraphrases

from fastrag.evaluation.datasets import ground_truth, load_dataset
from fastrag.evaluation.recall import IOU_THRESHOLD, MISS_CAUSES, RECALL_KS, iou, miss_cause
from fastrag.indexing.builder import IndexParams, build_index
from fastrag.retrieval import precision
from fastrag.retrieval.query import analyse
from fastrag.retrieval.retriever import (
    Hit,
    Retriever,
    clean_query,
    distinct,
    hits_to_sources,
    interleave,
    nested_first,
)
from fastrag.schemas import MinimalSource

SECTION = "## Cross-validation"
SpanT = TypeVar("SpanT")
TruthT = TypeVar("TruthT")
K = max(RECALL_KS)
SEED = 0
#: The fit's L2 penalty and its most iterations (benches/cv_repos.py chooses the penalty out of fold).
L2, STEPS = 0.01, 1000
#: Resamples of the questions behind each bootstrap interval.
BOOTSTRAP = 2000


class Fitted(Protocol):
    """What the fit reads of a question: its candidates' ids and features, which of them find its truth, and
    which find each of its truths (``covers``: one row per truth)."""

    ids: list[int]
    features: np.ndarray
    label: np.ndarray
    covers: np.ndarray


@dataclass(slots=True)
class Question:
    """A question's candidates (chunk ids, features, whether each finds the truth, and which of its sources each
    finds: ``covers``, one row per source) and its truth."""

    dataset: str
    qid: str
    text: str
    truth: list[tuple[str, int, int]]
    ids: list[int]
    features: np.ndarray
    label: np.ndarray
    places: list[Hit]
    covers: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 0), dtype=bool))


def collect(
    retriever: Retriever,
    datasets: Sequence[Path],
    depth: int = precision.DEPTH,
    reworded: dict[str, dict[str, str]] | None = None,
    form: str = "paraphrased",
) -> list[Question]:
    """Candidates (``depth`` of them) and features of every question of ``datasets``, as the retriever computes them.

    ``reworded`` (set file name -> question id -> text): ask the rewordings instead, of the sets
    that have them (named ``<set>_<form>.json``); the other sets are skipped.
    """
    chunks = retriever.index.chunks
    out: list[Question] = []
    for path in datasets:
        name = path.name
        dataset = load_dataset(path)
        answered = ground_truth(dataset, path)
        asked = [q.question for q in answered]
        if reworded is not None:
            if name not in reworded:
                continue
            asked = [reworded[name][q.question_id] for q in answered]
            name = f"{path.stem}_{form}.json"
        texts = [clean_query(text) for text in asked]
        lists = retriever.lexical.search_many(texts, depth)
        places = retriever.heading_hits(texts, K)
        for i, (q, text, ranked) in enumerate(zip(answered, texts, lists)):
            truth = [(s.file_path, s.first_character_index, s.last_character_index) for s in q.sources]
            features = candidate_columns(retriever, text, ranked)
            ids = [cid for cid, _ in ranked]
            covers, label = covering([chunks.span(cid) for cid in ids], truth, lambda span, t: finds(span, [t]))
            out.append(Question(name, q.question_id, text, truth, ids, features, label, places.get(i, []), covers))
    return out


def candidate_columns(retriever: Retriever, text: str, ranked: Sequence[tuple[int, float]]) -> np.ndarray:
    """The ranker's :data:`~fastrag.retrieval.precision.COLUMNS` of every candidate of ``ranked`` for ``text``."""
    stage = retriever.precision
    query = analyse(text, retriever.index.bm25)
    rows = stage.features(query, ranked)
    traits = stage.traits(query, rows) if len(rows) else ()
    return np.array(stage.columns(rows, traits), dtype=np.float64).reshape(len(rows), len(precision.COLUMNS))


def full_mask() -> np.ndarray:
    """1.0 for every column of :data:`fastrag.retrieval.precision.COLUMNS`: the fit uses them all."""
    return np.ones(len(precision.COLUMNS))


def covering(
    spans: Sequence[SpanT], truths: Sequence[TruthT], covers: Callable[[SpanT, TruthT], bool]
) -> tuple[np.ndarray, np.ndarray]:
    """Which of ``spans`` cover each of ``truths`` (one row per truth, by ``covers``), and whether each span covers
    any (1.0 or 0.0): a question's ``covers`` and ``label``."""
    rows = np.array([[covers(span, truth) for span in spans] for truth in truths], dtype=bool)
    rows = rows.reshape(len(truths), len(spans))
    return rows, np.asarray(rows.any(axis=0), dtype=np.float64)


def finds(span: tuple[str, int, int], truth: Sequence[tuple[str, int, int]]) -> bool:
    path, start, end = span
    return any(p == path and iou(start, end, s, e) > IOU_THRESHOLD for p, s, e in truth)


def fit(
    questions: Sequence[Fitted],
    mask: np.ndarray,
    weights: Sequence[float] | None = None,
    l2: float = L2,
    steps: int = STEPS,
    per_truth: bool = False,
) -> np.ndarray:
    """Weights of the listwise softmax loss over ``questions`` (columns selected by ``mask``), minimised
    by L-BFGS (the loss is convex: it reaches the optimum in a few hundred evaluations where Adam took
    thousands of steps).

    ``weights``: each question's share of the loss (default: equal), so that two pooled sources of
    questions can count alike whatever their sizes. ``l2``: the penalty, per question; ``steps``: the
    most iterations. ``per_truth``: a question's share is split among its truths that some candidate finds,
    each term minus the log of the mass of the candidates finding that truth (:attr:`Fitted.covers`), so that
    a question's second truth counts as its metric counts it, not only the mass of all its finding candidates.
    """
    from scipy.optimize import minimize

    keep = [i for i, q in enumerate(questions) if q.label.any()]
    usable = [questions[i] for i in keep]
    out = np.zeros(len(mask))
    active = np.flatnonzero(mask)
    if not usable or not len(active):
        return out
    share = np.ones(len(usable)) if weights is None else np.array([weights[i] for i in keep], dtype=np.float64)
    share = share / share.sum()
    x = np.ascontiguousarray(np.concatenate([q.features for q in usable])[:, active])
    sizes = [len(q.ids) for q in usable]
    starts = np.cumsum([0] + sizes)[:-1]
    seg = np.repeat(np.arange(len(usable)), sizes)
    penalty = l2 / len(usable)
    # Each term of the loss: a question, the rows of the candidates it credits, its share.
    sets = [q.covers[q.covers.any(axis=1)] if per_truth and q.covers.size else q.label[None, :] > 0 for q in usable]
    counts = [len(s) for s in sets]
    term_q = np.repeat(np.arange(len(usable)), counts)
    term_share = share[term_q] / np.repeat(counts, counts)
    rows = [starts[i] + np.flatnonzero(row) for i, s in enumerate(sets) for row in s]
    lengths = np.array([len(r) for r in rows])
    credited = np.concatenate(rows)
    term_starts = np.cumsum(np.concatenate(([0], lengths)))[:-1]
    term_of_row = np.repeat(np.arange(len(rows)), lengths)

    def loss_and_gradient(w: np.ndarray) -> tuple[float, np.ndarray]:
        s = x @ w
        e = np.exp(s - np.maximum.reduceat(s, starts)[seg])
        z = np.add.reduceat(e, starts)
        p = np.add.reduceat(e[credited], term_starts)
        loss = float(term_share @ (np.log(z[term_q]) - np.log(p))) + 0.5 * penalty * float(w @ w)
        pulled = np.zeros(len(s))
        np.add.at(pulled, credited, term_share[term_of_row] * e[credited] / p[term_of_row])
        grad = x.T @ (share[seg] * e / z[seg] - pulled) + penalty * w
        return loss, grad

    found = minimize(loss_and_gradient, np.zeros(len(active)), jac=True, method="L-BFGS-B", options={"maxiter": steps})
    out[active] = found.x
    return out


#: The column of whether a candidate is documentation (the first-stage evidence of the ``docs_lead`` trait).
DOC = precision.FEATURES.index("doc_file")


def docs_lead(columns: np.ndarray) -> float:
    """The ``docs_lead`` trait of a question's candidates from their columns (best first)."""
    return precision.lead_share(columns[:, 0].tolist(), columns[:, DOC].tolist())


#: What ranks a question's candidates: linear weights over its columns, or any model of its columns.
Ranker = np.ndarray | Callable[[np.ndarray], np.ndarray]


def model_scores(features: np.ndarray, weights: Ranker) -> np.ndarray:
    """The candidates' scores under ``weights`` (:data:`Ranker`)."""
    return weights(features) if callable(weights) else features @ weights


def ranked_hits(
    q: Question, weights: Ranker, retriever: Retriever, headings: bool = True, pages: bool = True
) -> list[Hit]:
    """The first ``K`` hits of ``q`` ranked by ``weights``, through the retriever's own post-processing
    (``pages``: as :meth:`~fastrag.retrieval.retriever.Retriever.weigh_files` takes it)."""
    if not q.ids:
        return []
    scores = model_scores(q.features, weights)
    order = sorted(range(len(q.ids)), key=lambda j: (-scores[j], q.ids[j]))
    ranked = nested_first([(q.ids[j], float(scores[j])) for j in order], retriever.index.chunks)
    decay = retriever.spread_of(q.text, docs_lead(q.features))
    ranked = retriever.weigh_files(ranked, q.text, decay, pages)
    hits: Iterator[Hit] = (Hit(*retriever.index.chunks.span(cid), score) for cid, score in ranked)
    if headings and q.places:
        hits = interleave(q.places, hits)
    return distinct(hits, K)


def recall(
    q: Question, weights: Ranker, retriever: Retriever, headings: bool = True, pages: bool = True
) -> dict[int, float]:
    """recall@k of ``q`` ranked by ``weights`` (:func:`ranked_hits`)."""
    top = ranked_hits(q, weights, retriever, headings, pages)
    return {k: found_share(q.truth, top[:k]) for k in RECALL_KS}


def searched_recall(
    retriever: Retriever, questions: list[Question], folds: int, targets: Sequence[Question] | None = None
) -> list[dict[int, float]]:
    """Out-of-fold recall of every question of ``targets`` (default: ``questions``) as the retriever
    itself searches it (its default mode, fusion included), its ranker's weights fitted on the folds
    of ``questions`` that do not hold its question id (:func:`target_folds`)."""
    aimed = list(questions if targets is None else targets)
    out: list[dict[int, float]] = [{} for _ in aimed]
    stage = retriever.precision
    saved = stage.weights
    try:
        for w, rows in held_out(questions, folds, full_mask(), aimed):
            stage.set_weights(list(w[1:] / w[0]) if w[0] > 0 else [0.0] * (len(w) - 1))
            for i, hits in zip(rows, retriever.search_many([aimed[i].text for i in rows], K)):
                out[i] = {k: found_share(aimed[i].truth, hits[:k]) for k in RECALL_KS}
    finally:
        stage.set_weights(saved)
    return out


def found_share(truth: Sequence[tuple[str, int, int]], hits: Sequence[Hit]) -> float:
    """Share of the ``truth`` spans that some hit finds by the grading rule."""
    return sum(any(finds((h.file_path, h.start, h.end), [t]) for h in hits) for t in truth) / len(truth)


def anatomy(questions: list[Question], weights: np.ndarray, retriever: Retriever) -> str:
    """Markdown table of the ground-truth spans each set misses at 5, by cause
    (:func:`fastrag.evaluation.recall.miss_cause`, the causes ``evaluate`` prints)."""
    counts: dict[str, list[int]] = {}
    for q in questions:
        row = counts.setdefault(q.dataset, [0] * (2 + len(MISS_CAUSES)))
        top = hits_to_sources(ranked_hits(q, weights, retriever))
        for path, start, end in q.truth:
            truth = MinimalSource(file_path=path, first_character_index=start, last_character_index=end)
            row[0] += 1
            cause = miss_cause(top, truth)
            if cause is not None:
                row[1] += 1
                row[2 + MISS_CAUSES.index(cause)] += 1
    lines = [
        "| questions | spans | missed at 5 | " + " | ".join(MISS_CAUSES) + " |",
        "|---" * (3 + len(MISS_CAUSES)) + "|",
    ]
    lines += [f"| {name} | {' | '.join(map(str, row))} |" for name, row in counts.items()]
    return "\n".join(lines)


def folds_of(n: int, folds: int) -> np.ndarray:
    """The fold of each of ``n`` questions: a fixed random permutation dealt round-robin."""
    return dealt(np.random.default_rng(SEED).permutation(n), folds)


def dealt(order: np.ndarray, folds: int) -> np.ndarray:
    """The fold of each item when the permutation ``order`` of them is dealt round-robin into ``folds``."""
    fold = np.empty(len(order), dtype=np.int64)
    fold[order] = np.arange(len(order)) % folds
    return fold


def target_folds(questions: Sequence[Question], fold: np.ndarray, targets: Sequence[Question]) -> np.ndarray:
    """The fold of each target: that of the question of ``questions`` with its id (a rewording is held
    out with its original); -1, never scored, for an id ``questions`` does not have."""
    by_id = {q.qid: int(g) for q, g in zip(questions, fold)}
    return np.array([by_id.get(t.qid, -1) for t in targets], dtype=np.int64)


def held_out(
    questions: Sequence[Question], folds: int, mask: np.ndarray, targets: Sequence[Question]
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """For each fold: the weights fitted on the other folds of ``questions`` (features selected by
    ``mask``), and the rows of ``targets`` the fold holds out (:func:`target_folds`)."""
    fold = folds_of(len(questions), folds)
    where = target_folds(questions, fold, targets)
    for f in range(folds):
        yield fit([q for q, g in zip(questions, fold) if g != f], mask), np.nonzero(where == f)[0]


def cross_validate(
    questions: list[Question],
    retriever: Retriever,
    folds: int,
    mask: np.ndarray,
    headings: bool = True,
    targets: Sequence[Question] | None = None,
) -> list[dict[int, float]]:
    """Out-of-fold recall of every question of ``targets`` (default: ``questions``), ranked with the
    weights fitted on the folds of ``questions`` that do not hold its question id."""
    aimed = list(questions if targets is None else targets)
    out: list[dict[int, float]] = [{} for _ in aimed]
    for weights, rows in held_out(questions, folds, mask, aimed):
        for i in rows:
            out[i] = recall(aimed[i], weights, retriever, headings)
    return out


def kind_rows(questions: Sequence[Question], kind: str) -> list[int]:
    """Positions of the questions of one kind (``docs`` or ``code``, from their set's name)."""
    return [i for i, q in enumerate(questions) if f"_{kind}_" in q.dataset]


def groups(questions: Sequence[Question]) -> dict[str, list[int]]:
    """The rows every report shows: each question set, then pooled docs and code (when both are
    there), then all questions; each with the positions of its questions."""
    found: dict[str, list[int]] = {}
    for i, q in enumerate(questions):
        found.setdefault(q.dataset, []).append(i)
    for kind in ("docs", "code"):
        rows = kind_rows(questions, kind)
        if rows and len(rows) < len(questions):
            found[f"pooled {kind}"] = rows
    found["pooled, all"] = list(range(len(questions)))
    return found


def table(questions: list[Question], columns: dict[str, list[dict[int, float]]]) -> str:
    """Markdown rows: every question set, then the pooled docs/code/all rows, one R@1/3/5/10 cell per column."""
    head = "| questions | n | " + " | ".join(f"{c} R@{'/'.join(map(str, RECALL_KS))}" for c in columns) + " |"
    lines = [head, "|" + "---|" * (2 + len(columns))]
    for name, rows in groups(questions).items():
        cells = []
        for per in columns.values():
            cells.append("/".join(f"{np.mean([per[i][k] for i in rows]):.3f}".lstrip("0") for k in RECALL_KS))
        lines.append(f"| {name} | {len(rows)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def bootstrap_interval(values: Sequence[float], level: float = 0.95, reps: int = BOOTSTRAP) -> tuple[float, float]:
    """The ``level`` percentile interval of the mean of ``values`` over ``reps`` resamples of them
    (with replacement, seeded): how far a recall could move on another draw of as many questions."""
    data = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(SEED)
    means = data[rng.integers(0, len(data), size=(reps, len(data)))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def intervals(questions: list[Question], per: list[dict[int, float]], at: int = 5) -> str:
    """One line: the recall@``at`` of every row of :func:`groups` with its 95% bootstrap interval."""
    cells = []
    for name, rows in groups(questions).items():
        if rows:
            values = [per[i][at] for i in rows]
            lo, hi = bootstrap_interval(values)
            cells.append(f"{name} {np.mean(values):.3f} [{lo:.3f}, {hi:.3f}]")
    return "; ".join(cells)


def index_params(retriever: Retriever) -> IndexParams:
    """The parameters the retriever's index was built with."""
    raw = retriever.index.manifest["params"]
    return IndexParams(**{f.name: raw[f.name] for f in dataclasses.fields(IndexParams) if f.name in raw})


def rebuilt_recall(
    retriever: Retriever,
    params: IndexParams,
    datasets: Sequence[Path],
    folds: int,
    reworded: dict[str, dict[str, str]] | None = None,
) -> list[dict[int, float]]:
    """Out-of-fold recall with the retriever's repository indexed again (in a temporary folder) with
    ``params``, ranked like the other columns (lexical candidates: no vectors are built). With
    ``reworded`` (:func:`collect`), the recall of the rewordings follows that of the questions."""
    repo = Path(str(retriever.index.manifest["repo_path"]))
    root = str(retriever.index.manifest.get("display_root") or "")
    with tempfile.TemporaryDirectory(prefix="fastrag-cv-") as tmp:
        build_index(repo, Path(tmp), dataclasses.replace(params, embed="none"), display_root=root, progress=False)
        other = Retriever.open(Path(tmp))
        questions = collect(other, datasets)
        full = full_mask()
        out = cross_validate(questions, other, folds, full)
        if reworded:
            out += cross_validate(questions, other, folds, full, targets=collect(other, datasets, reworded=reworded))
        return out


def index_ablation(
    retriever: Retriever, datasets: Sequence[Path], folds: int, reworded: dict[str, dict[str, str]] | None = None
) -> dict[str, list[dict[int, float]]]:
    """Out-of-fold recall with the index rebuilt without each optional layer (of the questions, then
    of their rewordings when ``reworded`` is given)."""
    params = index_params(retriever)
    variants = {
        "without Markdown layers": dataclasses.replace(params, layers=False),
        "without bridges": dataclasses.replace(params, bridges=False),
        "heading lines without section text": dataclasses.replace(params, heading_body=0),
    }
    return {label: rebuilt_recall(retriever, changed, datasets, folds, reworded) for label, changed in variants.items()}


def pooled_recall(per: list[dict[int, float]], questions: list[Question], kind: str, at: int = 5) -> float:
    """Mean recall@``at`` (default 5) of the questions of one kind (``docs`` or ``code``; all when none is)."""
    rows = kind_rows(questions, kind) or list(range(len(questions)))
    return float(np.mean([per[i][at] for i in rows]))


def without(feature: str) -> np.ndarray:
    """:func:`full_mask` with one feature's column and its products with the traits left out."""
    mask = full_mask()
    for j, name in enumerate(precision.COLUMNS):
        if name == feature or name.startswith(f"{feature}*"):
            mask[j] = 0.0
    return mask


def shipped_weights() -> np.ndarray:
    """The package's weights over :data:`~fastrag.retrieval.precision.COLUMNS`, the first-stage one 1."""
    return np.array([1.0, *precision.shipped_weights()])


def write_weights(relative: np.ndarray, fitted_on: list[str], questions: int, objective: str) -> None:
    """Write the shipped ranker weights (``precision.RANKER_FILE``), fitted on every question, atomically."""
    target = Path(precision.__file__).with_name(precision.RANKER_FILE)
    record = {
        "columns": list(precision.COLUMNS),
        "weights": [round(float(w), 4) for w in relative],
        "fitted_on": fitted_on,
        "questions": questions,
        "objective": objective,
        "fitted": time.strftime("%Y-%m-%d"),
    }
    write_text_atomic(target, json.dumps(record, indent=2) + "\n")
    print(f"wrote {target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index_dir", type=Path, default=ROOT / "data/processed")
    parser.add_argument("--datasets", type=Path, default=ROOT / "data/datasets/AnsweredQuestions")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument(
        "--paraphrased", type=Path, default=PARAPHRASES, help="rewordings of the questions, scored but never fitted on"
    )
    parser.add_argument("--no-write", action="store_true", help="print only; leave benches/RESULTS.md alone")
    parser.add_argument(
        "--index-ablation", action="store_true", help="also rebuild the index without each optional chunk layer"
    )
    parser.add_argument(
        "--grid", action="store_true", help="also select every discrete tunable out of fold (benches/cv_grid.py)"
    )
    args = parser.parse_args()
    datasets = sorted(args.datasets.glob("*.json"))
    if not datasets or args.folds < 2:
        sys.exit(f"cv: no question sets in {args.datasets}" if not datasets else "cv: --folds must be at least 2")
    started = time.perf_counter()
    retriever = Retriever.open(args.index_dir)
    questions = collect(retriever, datasets)
    n_columns = len(precision.COLUMNS)
    full = full_mask()
    shipped_w = shipped_weights()
    fitted = fit(questions, full)
    columns = {
        "shipped": [recall(q, shipped_w, retriever) for q in questions],
        "in sample": [recall(q, fitted, retriever) for q in questions],
        "out of fold": cross_validate(questions, retriever, args.folds, full),
    }
    if retriever.index.has_vectors:
        columns["default mode, out of fold"] = searched_recall(retriever, questions, args.folds)
    rewordings = paraphrases(args.paraphrased) if args.paraphrased.is_file() else {}
    reworded = collect(retriever, datasets, reworded=rewordings) if rewordings else []
    reworded_columns = {
        "shipped": [recall(q, shipped_w, retriever) for q in reworded],
        "out of fold": cross_validate(questions, retriever, args.folds, full, targets=reworded),
    }
    if retriever.index.has_vectors:
        reworded_columns["default mode, out of fold"] = searched_recall(retriever, questions, args.folds, reworded)
    # every row: the questions' out-of-fold recall, then their rewordings' (scored, never fitted on)
    both = questions + reworded
    ablation: dict[str, list[dict[int, float]]] = {
        "all parts": columns["out of fold"] + reworded_columns["out of fold"]
    }
    for name in precision.FEATURES[1:]:
        ablation[f"without {name}"] = cross_validate(questions, retriever, args.folds, without(name), targets=both)
    ablation["without heading lines"] = cross_validate(
        questions, retriever, args.folds, full, headings=False, targets=both
    )
    ablation["first stage alone"] = [recall(q, np.eye(n_columns)[0], retriever, headings=False) for q in both]
    if args.index_ablation:
        ablation.update(index_ablation(retriever, datasets, args.folds, rewordings))
    grid = ""
    if args.grid:
        from cv_grid import INTRO, grid_table

        grid = f"{INTRO}:\n\n{grid_table(retriever, datasets, questions, args.folds, pooled_recall)}\n\n"
    relative = fitted / fitted[0]
    shipped_text = ", ".join(f"{f} {w:.3f}" for f, w in zip(precision.COLUMNS, shipped_w) if w)
    full_parts = ablation["all parts"]
    gains = "; ".join(
        f"{name}: docs {pooled_recall(full_parts, questions, 'docs') - pooled_recall(per, questions, 'docs'):+.3f},"
        f" code {pooled_recall(full_parts, questions, 'code') - pooled_recall(per, questions, 'code'):+.3f}"
        for name, per in ablation.items()
        if name != "all parts"
    )
    ablation_tables = "".join(
        f"{table(asked, {name: per[lo : lo + len(asked)] for name, per in ablation.items()})}\n\n"
        for asked, lo in ((questions, 0), (reworded, len(questions)))
        if asked
    )
    last = list(columns)[-1]  # default mode when the index has vectors, else out of fold
    body = (
        f"{SECTION}\n\n"
        f"{machine()}\n\n"
        f"`python benches/cv.py`: {len(questions)} questions of "
        f"{len(datasets)} sets ({', '.join(p.name for p in datasets)}), pooled, {args.folds} folds by question "
        f"(seed {SEED}), k = {K}. The ranker is fitted on the BM25 candidates; the first three columns rank"
        ' them (with heading lines for "where" questions), *default mode, out of fold* is what the'
        " retriever returns in its default mode (with vectors: fused) with weights fitted out of fold."
        f" Weights fitted on all questions, relative to the first-stage "
        f"score: {', '.join(f'{f} {w:.3f}' for f, w in zip(precision.COLUMNS, relative) if w)}; shipped: "
        f"{shipped_text}.\n\n"
        f"{table(questions, columns)}\n\n"
        f"Recall@5 of the last column with its 95% interval ({BOOTSTRAP} bootstrap resamples of the questions:"
        f" how far it could move on another draw of as many): {intervals(questions, columns[last])}.\n\n"
        "Each part switched off, weights refitted out of fold (the first row is the full stage out of fold; "
        "*first stage alone* is BM25 with no precision stage and no heading lines); the rewordings below"
        " the questions:\n\n"
        f"{ablation_tables}"
        f"Pooled recall@5 out of fold that each part earns (full minus without it): {gains}.\n\n"
        f"{grid}"
        "Misses at 5 by cause, with the weights fitted on all questions (ground-truth spans; the causes"
        " `evaluate` prints):\n\n"
        f"{anatomy(questions, fitted, retriever)}\n"
    )
    if reworded:
        body += (
            f"\nThe same questions reworded (`{shown(args.paraphrased)}`:"
            " no code identifier or file name as spelled in code, no three-word run of the evidence or the"
            " question), scored with the weights fitted out of fold on the originals, never fitted on;"
            " a rewording is held out with its original:\n\n"
            f"{table(reworded, reworded_columns)}\n\n"
            f"{anatomy(reworded, fitted, retriever)}\n"
        )
    print(body)
    if not args.no_write:
        replace_section(RESULTS, SECTION, body)
    print(f"cv: {time.perf_counter() - started:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
