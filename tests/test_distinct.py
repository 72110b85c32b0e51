"""The duplicate filter of retrieval results and the ordering of nested chunks
(:func:`fastrag.retrieval.retriever.distinct`, :func:`fastrag.retrieval.retriever.nested_first`)."""

from __future__ import annotations

from fastrag.indexing.generations import ChunkTable
from fastrag.retrieval.retriever import NESTED, OVERLAP, Hit, distinct, nested_first


def hit(start: int, end: int, path: str = "a.md", score: float = 1.0) -> Hit:
    return Hit(path, start, end, score)


def test_mostly_overlapping_later_hits_are_dropped() -> None:
    first = hit(0, 1000)
    half = hit(500, 1500)  # shares 50% of the shorter
    touching = hit(1000 - int(OVERLAP * 1000), 2000)  # shares exactly OVERLAP: kept
    other_file = hit(0, 1000, "b.md")
    assert distinct([first, half, touching, other_file], 10) == [first, touching, other_file]


def test_a_large_share_inside_is_still_a_duplicate() -> None:
    outer = hit(0, 1000)
    inner = hit(100, 100 + int(2 * NESTED * 1000))  # inside, but a tenth of the outer span
    assert distinct([outer, inner], 10) == [outer]
    assert distinct([inner, outer], 10) == [inner]


def test_a_nested_short_hit_is_not_a_duplicate_either_way() -> None:
    outer = hit(1000, 2000)
    inner = hit(1400, 1400 + int(NESTED * 1000))  # 5% of the outer span
    assert distinct([outer, inner], 10) == [outer, inner]
    assert distinct([inner, outer], 10) == [inner, outer]
    assert distinct([outer, hit(1400, 1440, "b.md"), inner], 2) == [outer, hit(1400, 1440, "b.md")]


def test_a_nested_hit_that_duplicates_another_result_is_dropped() -> None:
    outer = hit(1000, 3000)
    neighbour = hit(2990, 3040)
    inner = hit(2995, 3000)  # nested in outer, but a tenth of neighbour and inside it
    assert distinct([neighbour, outer, inner], 10) == [neighbour, outer]


def test_distinct_edge_cases() -> None:
    assert distinct([], 5) == []
    assert distinct(iter([hit(0, 10)]), 5) == [hit(0, 10)]
    assert distinct([hit(0, 10), hit(0, 10, "b.md")], 0) == []


# a.md: 0 = [1000, 2000), 1 = [1400, 1440) and 2 = [1700, 1720) inside it, 3 = [1100, 1300)
# (a fifth of 0); b.md: 4 = [0, 500), 5 = [100, 120) inside it; c.md: 6 = [0, 30)
TABLE = ChunkTable(
    paths=["a.md", "b.md", "c.md"],
    file=[0, 0, 0, 0, 1, 1, 2],
    start=[1000, 1400, 1700, 1100, 0, 100, 0],
    end=[2000, 1440, 1720, 1300, 500, 120, 30],
)


def ids(ranked: list[tuple[int, float]]) -> list[int]:
    return [cid for cid, _ in ranked]


def test_a_nested_chunk_moves_right_behind_the_first_chunk_holding_it() -> None:
    ranked = [(0, 1.0), (4, 0.9), (6, 0.8), (1, 0.7)]
    out = nested_first(ranked, TABLE)
    assert ids(out) == [0, 1, 4, 6]
    assert dict(out) == dict(ranked)  # scores unchanged, nothing lost


def test_one_chunk_moves_per_holder_and_the_others_keep_their_rank() -> None:
    ranked = [(0, 1.0), (4, 0.9), (2, 0.8), (6, 0.7), (1, 0.6), (5, 0.5)]
    assert ids(nested_first(ranked, TABLE)) == [0, 2, 4, 5, 6, 1]


def test_nothing_moves_without_a_better_holder() -> None:
    for ranked in (
        [(1, 1.0), (0, 0.9)],  # the holder ranks lower
        [(0, 1.0), (3, 0.9)],  # inside, but a fifth of the holder
        [(4, 1.0), (6, 0.9), (1, 0.8)],  # no holder among the candidates
        [(0, 1.0)],
        [],
    ):
        assert nested_first(ranked, TABLE) == ranked
