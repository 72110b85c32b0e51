"""Weighted reciprocal rank fusion."""

from __future__ import annotations

import pytest

from fastrag.retrieval.fusion import order_head, rrf


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


def test_the_margin_orders_the_first_results_only() -> None:
    """The lexical margin re-orders the first ``head`` fused items; which items they are, and all
    that follows, stay as fused."""
    fused = [(1, 0.05), (2, 0.049), (3, 0.048), (4, 0.047), (5, 0.046)]
    lexical = [(3, 10.0), (5, 9.0), (2, 2.0)]
    ordered = order_head(fused, lexical, weight=0.01, head=3)
    assert [i for i, _ in ordered] == [3, 2, 1, 4, 5]
    assert dict(ordered)[3] == pytest.approx(0.048 + 0.01 * 1.0)
    assert dict(ordered)[2] == pytest.approx(0.049 + 0.01 * 0.2)
    assert ordered[3:] == fused[3:]  # 5's margin does not lift it into the head
    heavy = order_head(fused, lexical, weight=1.0, head=5)
    assert [i for i, _ in heavy] == [3, 5, 2, 1, 4]


def test_no_margin_leaves_the_fusion_alone() -> None:
    fused = [(1, 0.05), (2, 0.04)]
    assert order_head(fused, [(2, 5.0)], weight=0.0) == fused
    assert order_head(fused, [], weight=0.5) == fused
    assert order_head(fused, [(2, 0.0)], weight=0.5) == fused  # nothing matched lexically
    assert order_head([], [(2, 5.0)]) == []


def test_margin_ties_keep_the_fused_order() -> None:
    fused = [(7, 0.03), (8, 0.02), (9, 0.01)]
    assert [i for i, _ in order_head(fused, [(9, 1.0), (8, 1.0), (7, 1.0)], weight=0.001)] == [7, 8, 9]
    # equal after the margin: the fused order decides
    assert [i for i, _ in order_head([(4, 0.5), (3, 0.25)], [(3, 2.0), (4, 1.0)], weight=0.5)] == [4, 3]
