"""Weighted Reciprocal Rank Fusion of ranked lists.

RRF (Cormack, Clarke & Büttcher, 2009) scores an item by ``sum_i w_i / (c + rank_i)`` over
the lists it appears in (rank from 1). It needs no score calibration between retrievers whose
scores live on different scales (BM25 sums vs cosines), which is exactly our case.
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
