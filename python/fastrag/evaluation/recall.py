"""recall@k by the grading rule of SPEC.md, and why ground-truth spans are missed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fastrag.schemas import AnsweredQuestion, MinimalSearchResults, MinimalSource

#: The cut-offs reported by ``evaluate``.
RECALL_KS = (1, 3, 5, 10)
#: A retrieved span finds a ground-truth span when their IoU is strictly above this.
IOU_THRESHOLD = 0.05
#: The cut-off whose misses :func:`miss_cause` explains: the results a reader (and recall@5) sees first.
MISS_K = 5
#: Why a ground-truth span is not found in the first :data:`MISS_K` results (:func:`miss_cause`),
#: in the order ``evaluate`` prints them: no retrieved span is from its file; one is, but none of
#: them matches the span; a later result matches it.
MISS_CAUSES = ("file not retrieved", "file retrieved, span off", f"found after the first {MISS_K}")


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


def miss_cause(retrieved: Sequence[MinimalSource], truth: MinimalSource) -> str | None:
    """Why ``truth`` is not found among the first :data:`MISS_K` retrieved spans (one of
    :data:`MISS_CAUSES`, judged over the first ``max(RECALL_KS)`` of ``retrieved``: what results
    files hold), or ``None`` when it is.

    The three causes call for different fixes: a file never retrieved is a first-stage miss, a
    file retrieved with the span off is a matter of where the chunks are cut or which of a file's
    spans ranks first, and a span found later is a matter of ranking.
    """
    shown = retrieved[: max(RECALL_KS)]
    found = [n for n, r in enumerate(shown) if finds(r, truth)]
    if found and found[0] < MISS_K:
        return None
    if found:
        return MISS_CAUSES[2]
    if any(r.file_path == truth.file_path for r in shown):
        return MISS_CAUSES[1]
    return MISS_CAUSES[0]


@dataclass(frozen=True, slots=True)
class Evaluation:
    """Mean recall@k over a dataset, the questions missed at the largest k, and how many
    ground-truth spans (of ``spans``) are missed in the first :data:`MISS_K` results, by cause."""

    recall: dict[int, float]
    questions: int
    answered: int
    missed: list[str]
    spans: int
    causes: dict[str, int]


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
    causes = dict.fromkeys(MISS_CAUSES, 0)
    answered = spans = 0
    for q in truth:
        result = by_id.get(q.question_id)
        retrieved = result.retrieved_sources if result is not None else []
        answered += result is not None
        for k in ks:
            sums[k] += question_recall(retrieved, q.sources, k)
        if question_recall(retrieved, q.sources, max(ks)) < 1.0:
            missed.append(q.question_id)
        for source in q.sources:
            spans += 1
            cause = miss_cause(retrieved, source)
            if cause is not None:
                causes[cause] += 1
    n = len(truth)
    return Evaluation({k: (s / n if n else 0.0) for k, s in sums.items()}, n, answered, missed, spans, causes)
