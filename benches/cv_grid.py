"""Nested selection of retrieval's discrete tunables, for ``benches/cv.py --grid``.

Each tunable is a short list of settings around the shipped one: BM25 k1 and b, the section text
indexed under heading lines, the chunkers' target size (index side: the index is rebuilt in a
temporary folder for each setting, and ranked like :mod:`cv`'s main columns, on BM25 candidates),
the precision stage's candidate depth (query side), and the fusion of vectors: no vectors, or the
vector list's weight and floor (on the index's own vectors, or on the repository indexed again with
vectors when it has none), then how deep each list goes into the fusion and its RRF constant, and
the weight of the lexical margin in the order of the first five fused results (which cannot change
recall@5, so it is selected on recall@1). For every setting, each question's recall is out of fold:
the ranker's weights are fitted without the question's fold (:func:`cv.cross_validate`; for the
fusion, the retriever itself searches, :func:`cv.searched_recall`). Then, fold by fold, the setting
with the best pooled recall@5 on the *other* folds is chosen (ties go to the shipped setting) and
the held-out fold is scored with it: the "selected out of fold" figure is what choosing the setting
by data earns on questions the choice never saw. A tunable whose selection does not beat its shipped
setting out of fold keeps the shipped value.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from cv import Question, collect, cross_validate, folds_of, full_mask, index_params, rebuilt_recall, searched_recall

from fastrag.indexing.builder import IndexParams, build_index
from fastrag.retrieval import precision
from fastrag.retrieval.fusion import HEAD
from fastrag.retrieval.retriever import Retriever

#: Index-side tunables: a label, then the settings tried (each a set of IndexParams fields).
INDEX_GRID: dict[str, list[dict[str, Any]]] = {
    "BM25 k1, b": [{"k1": k1, "b": b} for k1 in (0.9, 1.2, 1.6) for b in (0.6, 0.75, 0.9)],
    "section text under heading lines": [{"heading_body": n} for n in (0, 200, 400, 800)],
    "chunk target size": [{"target_size": n} for n in (1000, 1500, 2000)],
}
#: How the table is introduced in benches/RESULTS.md.
INTRO = (
    "Every discrete tunable selected out of fold (`--grid`): for each setting, recall with the ranker's"
    " weights fitted out of fold; in each fold, the setting best on the other four folds (ties: the"
    " shipped one) scores the held-out fold. *Selected* is what choosing by data earns on unseen"
    " questions; a tunable keeps its shipped value unless *selected* beats it"
)
#: Query-side tunables: candidates the precision stage re-ranks.
DEPTHS = (30, 50, 100)
#: Fusion of vectors (an index rebuilt with ``--vectors docs``): the vector list's weight beside
#: BM25's 1.0, and the best cosine it needs to join (the floor); the shipped setting is no vectors.
FUSION_GRID = [(w, g) for w in (0.1, 0.25, 0.5, 1.0) for g in (0.5, 0.6, 0.7)]
#: ... and, with the shipped weight and floor, how deep each list goes and the RRF constant.
FUSION_SHAPES = [(d, c) for d in (30, 50, 100) for c in (30.0, 60.0, 100.0)]
VECTOR_MODE = "docs"
#: ... and the weight of the lexical margin in the order of the first fused results
#: (:func:`fastrag.retrieval.fusion.order_head`). It cannot change which results come first, only
#: their order, so it is selected on recall@1.
MARGINS = (0.0, 0.005, 0.01, 0.02, 0.05)

PerQuestion = list[dict[int, float]]


def select(
    per_setting: Sequence[PerQuestion], shipped: int, fold: np.ndarray, at: int = 5
) -> tuple[PerQuestion, list[int]]:
    """Out-of-fold recall when each fold's setting is the best one on the other folds by recall@``at``
    (ties: ``shipped``), and the setting chosen for each fold."""
    out: PerQuestion = [{} for _ in per_setting[0]]
    chosen: list[int] = []
    for f in range(int(fold.max()) + 1):
        train = np.nonzero(fold != f)[0]
        means = [round(float(np.mean([per[i][at] for i in train])), 9) for per in per_setting]
        best = max(range(len(per_setting)), key=lambda j: (means[j], j == shipped))
        chosen.append(best)
        for i in np.nonzero(fold == f)[0]:
            out[i] = per_setting[best][i]
    return out, chosen


def grid_table(
    retriever: Retriever,
    datasets: Sequence[Path],
    questions: list[Question],
    folds: int,
    pooled_recall: Callable[[PerQuestion, list[Question], str, int], float],
) -> str:
    """Markdown table: for each tunable, the settings tried, the shipped one, the one each fold chose,
    and pooled recall@5 out of fold with the shipped setting and with the selected ones."""
    params = index_params(retriever)
    full = full_mask()
    fold = folds_of(len(questions), folds)
    head = "| tunable | settings tried | shipped | chosen per fold | pooled docs R@5 shipped / selected"
    lines = [head + " | pooled code R@5 shipped / selected |", "|---|---|---|---|---|---|"]

    def row(label: str, names: list[str], shipped: int, per_setting: list[PerQuestion], at: int = 5) -> None:
        selected, chosen = select(per_setting, shipped, fold, at)
        cells = [
            "; ".join(
                ("" if k == 5 else f"R@{k} ")
                + " / ".join(f"{pooled_recall(p, questions, kind, k):.3f}" for p in (per_setting[shipped], selected))
                for k in sorted({5, at}, reverse=True)
            )
            for kind in ("docs", "code")
        ]
        picks = " · ".join(names[j] for j in chosen)
        lines.append(f"| {label} | {'; '.join(names)} | {names[shipped]} | {picks} | {cells[0]} | {cells[1]} |")

    for label, settings in INDEX_GRID.items():
        names = [" ".join(f"{k} {v}" for k, v in s.items()) for s in settings]
        current = {k: getattr(params, k) for k in settings[0]}
        shipped = next((j for j, s in enumerate(settings) if s == current), None)
        if shipped is None:
            named = " ".join(f"{k} {v}" for k, v in current.items())
            settings, names, shipped = [current, *settings], [f"{named} (index)", *names], 0
        per_setting = [
            cross_validate(questions, retriever, folds, full)
            if j == shipped
            else rebuilt_recall(retriever, dataclasses.replace(params, **setting), datasets, folds)
            for j, setting in enumerate(settings)
        ]
        row(label, names, shipped, per_setting)

    depths = list(DEPTHS) if precision.DEPTH in DEPTHS else [precision.DEPTH, *DEPTHS]
    per_depth = [
        cross_validate(questions if d == precision.DEPTH else collect(retriever, datasets, d), retriever, folds, full)
        for d in depths
    ]
    row("precision depth", [str(d) for d in depths], depths.index(precision.DEPTH), per_depth)
    names = ["no vectors", *(f"weight {w} floor {g}" for w, g in FUSION_GRID)]
    per_fusion, shipped = fusion_recall(retriever, params, questions, folds)
    row(f"vector fusion (`--vectors {VECTOR_MODE}`)", names, shipped, per_fusion)
    if retriever.index.has_vectors:
        shipped_shape = (retriever.fusion_depth, retriever.rrf_c)
        shapes = FUSION_SHAPES if shipped_shape in FUSION_SHAPES else [shipped_shape, *FUSION_SHAPES]
        per_shape = searched_settings(retriever, questions, folds, ("fusion_depth", "rrf_c"), shapes)
        labels = [f"depth {d} c {c:g}" for d, c in shapes]
        row("fusion depth, RRF constant", labels, shapes.index(shipped_shape), per_shape)
        shipped_margin = retriever.margin_weight
        margins = MARGINS if shipped_margin in MARGINS else (shipped_margin, *MARGINS)
        per_margin = searched_settings(retriever, questions, folds, ("margin_weight",), [(w,) for w in margins])
        label = f"lexical margin in the first {HEAD} (selected on R@1)"
        row(label, [f"{w:g}" for w in margins], margins.index(shipped_margin), per_margin, 1)
    return "\n".join(lines)


def fusion_recall(
    retriever: Retriever, params: IndexParams, questions: list[Question], folds: int
) -> tuple[list[PerQuestion], int]:
    """Out-of-fold recall of every question with no vectors, then with each :data:`FUSION_GRID` setting,
    and which of them is shipped. The retriever's own index serves when it has vectors; otherwise
    the repository is indexed again with vectors (:data:`VECTOR_MODE`). Each fold's questions are
    searched by the retriever (:func:`cv.searched_recall`), its ranker's weights fitted on the other folds."""
    with tempfile.TemporaryDirectory(prefix="fastrag-cv-") as tmp:
        hybrid = retriever
        if not retriever.index.has_vectors:
            repo = Path(str(retriever.index.manifest["repo_path"]))
            root = str(retriever.index.manifest.get("display_root") or "")
            vectors = dataclasses.replace(params, embed=VECTOR_MODE)
            build_index(repo, Path(tmp), vectors, display_root=root, progress=False)
            hybrid = Retriever.open(Path(tmp), retriever.models_dir)
        shipped = (hybrid.vector_weight, hybrid.vector_gate)
        settings = [(0.0, float("inf")), *FUSION_GRID]
        out = searched_settings(hybrid, questions, folds, ("vector_weight", "vector_gate"), settings)
    chosen = 1 + FUSION_GRID.index(shipped) if retriever.index.has_vectors and shipped in FUSION_GRID else 0
    return out, chosen


def searched_settings(
    retriever: Retriever, questions: list[Question], folds: int, names: Sequence[str], settings: Sequence[Sequence[Any]]
) -> list[PerQuestion]:
    """Out-of-fold recall of every question as the retriever searches it (:func:`cv.searched_recall`)
    with its attributes ``names`` set to each of ``settings`` in turn; their own values are restored after."""
    saved = [getattr(retriever, name) for name in names]
    out: list[PerQuestion] = []
    try:
        for values in settings:
            for name, value in zip(names, values):
                setattr(retriever, name, value)
            out.append(searched_recall(retriever, questions, folds))
    finally:
        for name, value in zip(names, saved):
            setattr(retriever, name, value)
    return out
