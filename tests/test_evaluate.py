"""The grading rule and the data models."""

from __future__ import annotations

import json

import pytest

from fastrag.evaluation.recall import MISS_CAUSES, MISS_K, evaluate, finds, iou, miss_cause, question_recall
from fastrag.schemas import (
    AnsweredQuestion,
    MinimalSearchResults,
    MinimalSource,
    RagDataset,
    StudentSearchResults,
    UnansweredQuestion,
)


def src(path: str, s: int, e: int) -> MinimalSource:
    return MinimalSource(file_path=path, first_character_index=s, last_character_index=e)


def test_iou() -> None:
    assert iou(0, 10, 0, 10) == 1.0
    assert iou(0, 10, 10, 20) == 0.0
    assert iou(0, 10, 5, 15) == pytest.approx(5 / 15)


def test_threshold_is_strict() -> None:
    truth = src("a.py", 0, 100)
    assert not finds(src("a.py", 0, 2000), truth)  # IoU exactly 0.05
    assert finds(src("a.py", 0, 1999), truth)
    assert not finds(src("b.py", 0, 100), truth)


def test_question_recall_counts_each_truth_once() -> None:
    truth = [src("a.py", 0, 100), src("b.md", 50, 150)]
    retrieved = [src("a.py", 0, 90), src("a.py", 10, 100), src("c.py", 0, 10), src("b.md", 60, 160)]
    assert question_recall(retrieved, truth, 1) == 0.5
    assert question_recall(retrieved, truth, 3) == 0.5
    assert question_recall(retrieved, truth, 4) == 1.0


def test_dataset_recall_is_mean_and_missing_results_score_zero() -> None:
    truth = [
        AnsweredQuestion(question_id="1", question="q1", sources=[src("a.py", 0, 100)], answer=""),
        AnsweredQuestion(question_id="2", question="q2", sources=[src("b.py", 0, 100)], answer=""),
    ]
    results = [MinimalSearchResults(question_id="1", question="q1", retrieved_sources=[src("a.py", 0, 100)])]
    report = evaluate(results, truth)
    assert report.recall[1] == 0.5 and report.answered == 1 and report.missed == ["2"]


def test_miss_cause_tells_file_span_and_rank_apart() -> None:
    truth = src("a.md", 1000, 1100)
    others = [src("b.py", 0, 100)] * 4
    assert miss_cause([*others[:2], src("a.md", 1000, 1100), *others[2:]], truth) is None  # rank 3
    assert miss_cause([*others, src("c.md", 0, 9), src("a.md", 990, 1200)], truth) == MISS_CAUSES[2]  # rank 6
    assert miss_cause([*others, src("a.md", 0, 900)], truth) == MISS_CAUSES[1]  # its file, another span
    assert miss_cause([src("a.md", 0, 3000)], truth) == MISS_CAUSES[1]  # holds it, but IoU 0.033
    assert miss_cause(others, truth) == MISS_CAUSES[0]
    assert miss_cause([], truth) == MISS_CAUSES[0]
    assert miss_cause([*others, src("a.md", 1000, 1100)], truth) is None  # rank 5
    assert MISS_CAUSES[2] == f"found after the first {MISS_K}"


def test_evaluate_counts_every_truth_span_by_cause_within_the_first_ten() -> None:
    truth = [
        AnsweredQuestion(question_id="1", question="q1", sources=[src("a.py", 0, 100), src("d.md", 0, 50)], answer=""),
        AnsweredQuestion(question_id="2", question="q2", sources=[src("b.py", 0, 100)], answer=""),
        AnsweredQuestion(question_id="3", question="q3", sources=[src("c.py", 0, 100)], answer=""),
    ]
    filler = [src("z.py", 0, 10)] * 10
    results = [
        MinimalSearchResults(
            question_id="1", question="q1", retrieved_sources=[src("a.py", 0, 100), src("d.md", 500, 900)]
        ),
        # found at rank 7, and at rank 11, which lies beyond the first ten: a file-level miss there
        MinimalSearchResults(question_id="2", question="q2", retrieved_sources=[*filler[:6], src("b.py", 0, 100)]),
        MinimalSearchResults(question_id="3", question="q3", retrieved_sources=[*filler, src("c.py", 0, 100)]),
    ]
    report = evaluate(results, truth)
    assert report.spans == 4
    assert report.causes == {MISS_CAUSES[0]: 1, MISS_CAUSES[1]: 1, MISS_CAUSES[2]: 1}
    assert report.recall[5] == pytest.approx(0.5 / 3)  # only a.py, half of question 1


def test_question_str_is_accepted_and_written() -> None:
    q = UnansweredQuestion.model_validate({"question_id": "x", "question_str": "What?"})
    assert q.question == "What?"
    out = StudentSearchResults(
        search_results=[MinimalSearchResults(question_id="x", question="What?", retrieved_sources=[])], k=3
    )
    row = json.loads(out.model_dump_json())["search_results"][0]
    assert row["question"] == row["question_str"] == "What?"


def test_dataset_mixes_answered_and_unanswered() -> None:
    data = RagDataset.model_validate(
        {"rag_questions": [{"question": "a", "sources": [], "answer": "b"}, {"question": "c"}]}
    )
    assert [type(q).__name__ for q in data.rag_questions] == ["AnsweredQuestion", "UnansweredQuestion"]
    assert data.rag_questions[1].question_id  # a fresh uuid
