"""Python face of the native BM25 index: queries in, ranked chunk ids out."""

from __future__ import annotations

from collections.abc import Sequence

from fastrag import _core
from fastrag.retrieval.evidence import subject_text
from fastrag.retrieval.query import glued_parts


class LexicalSearcher:
    """Ranks chunks for queries with the index's BM25, in batches across threads. A word the index does
    not know is also searched as the index terms it is glued from (:func:`~fastrag.retrieval.query.glued_parts`)."""

    def __init__(self, bm25: _core.Bm25Index) -> None:
        self.bm25 = bm25

    def search(self, query: str, depth: int, allowed: bytes | None = None) -> list[tuple[int, float]]:
        """The ``depth`` best ``(chunk_id, score)`` pairs for one query, best first (``allowed``: the
        candidate mask, one byte per chunk)."""
        ids, scores = self.bm25.search(self.searched(query), depth, allowed)
        return list(zip(ids, scores))

    def search_many(
        self, queries: Sequence[str], depth: int, allowed: bytes | None = None
    ) -> list[list[tuple[int, float]]]:
        """:meth:`search` for many queries in one native call (parallel, GIL released)."""
        searched = [self.searched(q) for q in queries]
        return [list(zip(ids, scores)) for ids, scores in self.bm25.search_batch(searched, depth, allowed)]

    def searched(self, query: str) -> str:
        """``query`` without the words that frame it (:func:`~fastrag.retrieval.evidence.subject_text`), with
        the parts of its glued words appended."""
        subject = subject_text(query)
        parts = glued_parts(subject, self.bm25)
        return f"{subject} {' '.join(parts)}" if parts else subject
