"""Python face of the native BM25 index: queries in, ranked chunk ids out."""

from __future__ import annotations

from collections.abc import Sequence

from fastrag import _core


class LexicalSearcher:
    """Ranks chunks for queries with the index's BM25, in batches across threads."""

    def __init__(self, bm25: _core.Bm25Index) -> None:
        self.bm25 = bm25

    def search(self, query: str, depth: int, allowed: bytes | None = None) -> list[tuple[int, float]]:
        """The ``depth`` best ``(chunk_id, score)`` pairs for one query, best first (``allowed``: the
        candidate mask, one byte per chunk)."""
        ids, scores = self.bm25.search(query, depth, allowed)
        return list(zip(ids, scores))

    def search_many(
        self, queries: Sequence[str], depth: int, allowed: bytes | None = None
    ) -> list[list[tuple[int, float]]]:
        """:meth:`search` for many queries in one native call (parallel, GIL released)."""
        return [list(zip(ids, scores)) for ids, scores in self.bm25.search_batch(list(queries), depth, allowed)]
