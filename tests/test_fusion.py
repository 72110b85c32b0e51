"""Weighted reciprocal rank fusion."""

from __future__ import annotations

import pytest

from fastrag.retrieval.fusion import rrf


def test_items_in_both_lists_win() -> None:
    fused = [i for i, _ in rrf([[1, 2, 3], [3, 4, 1]])]
    assert fused[:2] == [1, 3]
    assert set(fused) == {1, 2, 3, 4}


def test_scores_follow_the_formula() -> None:
    fused = dict(rrf([[7, 8], [8]], weights=[1.0, 2.0], c=10))
    assert fused[7] == pytest.approx(1 / 11)
    assert fused[8] == pytest.approx(1 / 12 + 2 / 11)


def test_weights_can_silence_a_list() -> None:
    assert [i for i, _ in rrf([[1, 2], [2, 1]], weights=[1.0, 0.0])] == [1, 2]


def test_ties_are_deterministic() -> None:
    assert [i for i, _ in rrf([[5], [6]])] == [5, 6]
    assert rrf([]) == []
    with pytest.raises(ValueError):
        rrf([[1]], weights=[1.0, 2.0])
