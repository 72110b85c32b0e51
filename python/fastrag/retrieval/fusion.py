"""Weighted Reciprocal Rank Fusion of ranked lists.

RRF (Cormack, Clarke & Büttcher, 2009) scores an item by ``sum_i w_i / (c + rank_i)`` over
the lists it appears in (rank from 1). It needs no score calibration between retrievers whose
scores live on different scales (BM25 sums vs cosines), which is exactly our case. What it
drops, the lexical list's margins, then decides the order of the first fused results
(:func:`order_head`).
"""

from __future__ import annotations

from collections.abc import Sequence

#: The usual RRF constant; larger values flatten the advantage of the very first ranks.
RRF_C = 60.0


def rrf(
    rankings: Sequence[Sequence[int]], weights: Sequence[float] | None = None, c: float = RRF_C
) -> list[tuple[int, float]]:
    """Fuse ranked lists of ids (best first) into one ``(id, score)`` list, best first.

    Ties are broken by the id's best rank in any list, then by the id, so the order is
    deterministic.
    """
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError("one weight per ranking is needed")
    scores: dict[int, float] = {}
    best: dict[int, int] = {}
    for ranking, weight in zip(rankings, weights):
        for rank, item in enumerate(ranking, 1):
            scores[item] = scores.get(item, 0.0) + weight / (c + rank)
            best[item] = min(best.get(item, rank), rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], best[kv[0]], kv[0]))


#: How many of the fused results are put in order by the lexical margin (:func:`order_head`): the
#: first five, the results a reader (and recall@5) sees first. Fixed, not tuned: ordering them
#: cannot change which five they are.
HEAD = 5
#: Weight of the lexical margin (a chunk's lexical score over the lexical list's best) added to the
#: fused score of the first :data:`HEAD` results. Selected out of fold on recall@1 on the pooled
#: public and dev questions (``benches/cv_grid.py``; benches/RESULTS.md, "Cross-validation").
MARGIN_WEIGHT = 0.02


def order_head(
    fused: Sequence[tuple[int, float]],
    lexical: Sequence[tuple[int, float]],
    weight: float = MARGIN_WEIGHT,
    head: int = HEAD,
) -> list[tuple[int, float]]:
    """``fused`` (id, RRF score; best first) with its first ``head`` items ordered by their RRF score
    plus ``weight`` × their ``lexical`` score over that list's best (0 when not in it).

    RRF keeps ranks and drops margins: a chunk BM25 ranks first far ahead of the rest and one it
    ranks first by a hair weigh the same, and a vector hit fused in at rank 1 or 2 can then move
    before a code chunk the question names outright. Inside the first ``head`` results the margin
    decides the order; which items they are stays the fusion's choice. ``lexical`` is the
    lexical list the fusion was given (best first, scores positive when anything matched).
    """
    if weight <= 0 or not lexical or lexical[0][1] <= 0 or len(fused) < 2:
        return list(fused)
    scale = weight / lexical[0][1]
    scores = dict(lexical)
    first = [(item, score + scale * scores.get(item, 0.0)) for item, score in fused[:head]]
    first.sort(key=lambda kv: -kv[1])  # stable: ties keep the fused order
    return first + list(fused[head:])
