"""recall@k by the grading rule of SPEC.md."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fastrag.schemas import AnsweredQuestion, MinimalSearchResults, MinimalSource

#: The cut-offs reported by ``evaluate``.
RECALL_KS = (1, 3, 5, 10)
#: A retrieved span finds a ground-truth span when their IoU is strictly above this.
IOU_THRESHOLD = 0.05


def iou(s1: int, e1: int, s2: int, e2: int) -> float:
    """Intersection over union of the character ranges ``[s1, e1)`` and ``[s2, e2)``."""
    inter = max(0, min(e1, e2) - max(s1, s2))
    union = (e1 - s1) + (e2 - s2) - inter
    return inter / union if union > 0 else 0.0


def finds(retrieved: MinimalSource, truth: MinimalSource) -> bool:
    """Whether a retrieved span finds a ground-truth span (same file, IoU > 0.05)."""
    return retrieved.file_path == truth.file_path and (
        iou(
            retrieved.first_character_index,
            retrieved.last_character_index,
            truth.first_character_index,
            truth.last_character_index,
        )
        > IOU_THRESHOLD
    )


def question_recall(retrieved: Sequence[MinimalSource], truth: Sequence[MinimalSource], k: int) -> float:
    """Share of ground-truth spans found among the first ``k`` retrieved spans."""
    if not truth:
        return 0.0
    top = retrieved[:k]
    return sum(any(finds(r, t) for r in top) for t in truth) / len(truth)


@dataclass(frozen=True, slots=True)
class Evaluation:
    """Mean recall@k over a dataset, and the questions missed at the largest k."""

    recall: dict[int, float]
    questions: int
    answered: int
    missed: list[str]


def evaluate(
    results: Sequence[MinimalSearchResults],
    truth: Sequence[AnsweredQuestion],
    ks: Sequence[int] = RECALL_KS,
) -> Evaluation:
    """recall@k for every k in ``ks``: the mean over all ground-truth questions.

    A question without a result scores 0; results for questions not in ``truth`` are ignored.
    """
    by_id = {r.question_id: r for r in results}
    sums = dict.fromkeys(ks, 0.0)
    missed: list[str] = []
    answered = 0
    for q in truth:
        result = by_id.get(q.question_id)
        retrieved = result.retrieved_sources if result is not None else []
        answered += result is not None
        for k in ks:
            sums[k] += question_recall(retrieved, q.sources, k)
        if question_recall(retrieved, q.sources, max(ks)) < 1.0:
            missed.append(q.question_id)
    n = len(truth)
    return Evaluation({k: (s / n if n else 0.0) for k, s in sums.items()}, n, answered, missed)
