"""One entry point for retrieval: questions in, ranked spans out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fastrag.config import DEFAULT_INDEX_DIR
from fastrag.generations import LoadedIndex, load_index
from fastrag.lexical import LexicalSearcher


@dataclass(frozen=True, slots=True)
class Hit:
    """A retrieved span: ``text[start:end]`` of ``file_path``, with its score."""

    file_path: str
    start: int
    end: int
    score: float


#: Candidates fetched per result wanted, so that de-duplication can still fill ``k``.
OVERFETCH = 3
#: Two spans of a file are duplicates when they share more than this share of the shorter.
OVERLAP = 0.3


class Retriever:
    """Searches a loaded index; build one with :meth:`open`."""

    def __init__(self, index: LoadedIndex) -> None:
        self.index = index
        self.lexical = LexicalSearcher(index.bm25)

    @classmethod
    def open(cls, index_dir: Path = DEFAULT_INDEX_DIR) -> Retriever:
        """Load the live index of ``index_dir``."""
        return cls(load_index(index_dir))

    def search(self, query: str, k: int) -> list[Hit]:
        """The ``k`` best spans for ``query``; empty for a blank query or ``k <= 0``."""
        return self.search_many([query], k)[0]

    def search_many(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """:meth:`search` for many queries at once (one parallel native call)."""
        if k <= 0:
            return [[] for _ in queries]
        chunks = self.index.chunks
        ranked = self.lexical.search_many([q if q.strip() else "" for q in queries], k * OVERFETCH)
        return [distinct([Hit(*chunks.span(cid), score) for cid, score in hits], k) for hits in ranked]


def distinct(hits: list[Hit], k: int) -> list[Hit]:
    """The first ``k`` hits, skipping any that mostly overlaps a better hit of the same file."""
    kept: list[Hit] = []
    for hit in hits:
        if not any(_overlaps(hit, other) for other in kept):
            kept.append(hit)
            if len(kept) == k:
                break
    return kept


def _overlaps(a: Hit, b: Hit) -> bool:
    if a.file_path != b.file_path:
        return False
    inter = min(a.end, b.end) - max(a.start, b.start)
    return inter > OVERLAP * min(a.end - a.start, b.end - b.start)
