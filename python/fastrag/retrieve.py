"""One entry point for retrieval: questions in, ranked spans out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fastrag.config import DEFAULT_INDEX_DIR, DEFAULT_MODELS_DIR
from fastrag.errors import UsageError, UserError
from fastrag.fusion import rrf
from fastrag.generations import LoadedIndex, load_index
from fastrag.lexical import LexicalSearcher

if TYPE_CHECKING:
    from fastrag.embed import Embedder


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
#: The search modes: BM25 alone, vectors alone, or both fused.
MODES = ("lexical", "vector", "hybrid")
#: How deep each retriever's list goes into the fusion, and the weight of each list
#: (measured on the public sets, see benches/RESULTS.md).
FUSION_DEPTH = 50
LEXICAL_WEIGHT = 1.0
VECTOR_WEIGHT = 0.25
#: Vectors join the fusion only when their best cosine reaches this: below it they are
#: guessing (nonsense queries top out near 0.31), and equal-weight fusion of weak vector
#: lists cost 0.17 code R@1 on the public set.
VECTOR_GATE = 0.6


class Retriever:
    """Searches a loaded index; build one with :meth:`open`.

    The embedding model is loaded on the first vector or hybrid search, and only when the
    index has vectors; lexical search never imports it.
    """

    def __init__(self, index: LoadedIndex, models_dir: Path = DEFAULT_MODELS_DIR) -> None:
        self.index = index
        self.lexical = LexicalSearcher(index.bm25)
        self.models_dir = models_dir
        self._embedder: Embedder | None = None

    @classmethod
    def open(cls, index_dir: Path = DEFAULT_INDEX_DIR, models_dir: Path = DEFAULT_MODELS_DIR) -> Retriever:
        """Load the live index of ``index_dir``."""
        return cls(load_index(index_dir), models_dir)

    def search(self, query: str, k: int, mode: str = "hybrid") -> list[Hit]:
        """The ``k`` best spans for ``query``; empty for a blank query or ``k <= 0``."""
        return self.search_many([query], k, mode)[0]

    def search_many(self, queries: Sequence[str], k: int, mode: str = "hybrid") -> list[list[Hit]]:
        """:meth:`search` for many queries at once (batched: one native call, one model call).

        ``mode`` is ``lexical``, ``vector`` or ``hybrid``; ``hybrid`` on an index without
        vectors is lexical.
        """
        if mode not in MODES:
            raise UsageError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if k <= 0:
            return [[] for _ in queries]
        clean = [clean_query(q) for q in queries]
        if mode == "vector" and not self.index.has_vectors:
            raise UserError(f"the index in {self.index.path.parent} has no vectors: re-run `index` with vectors")
        chunks = self.index.chunks
        depth = max(k * OVERFETCH, FUSION_DEPTH) if mode == "hybrid" else k * OVERFETCH
        lexical = self.lexical.search_many(clean, depth) if mode != "vector" else None
        vector = self._vector_search(clean, depth) if mode != "lexical" and self.index.has_vectors else None
        results: list[list[Hit]] = []
        for i, query in enumerate(clean):
            if not query:
                results.append([])
                continue
            weak = vector is not None and lexical is not None and (not vector[i] or vector[i][0][1] < VECTOR_GATE)
            if vector is None or weak:
                ranked = lexical[i] if lexical is not None else []
            elif lexical is None:
                ranked = vector[i]
            else:
                ranked = rrf(
                    [[cid for cid, _ in lexical[i]], [cid for cid, _ in vector[i]]],
                    weights=[LEXICAL_WEIGHT, VECTOR_WEIGHT],
                )
            results.append(distinct([Hit(*chunks.span(cid), score) for cid, score in ranked], k))
        return results

    def _vector_search(self, queries: list[str], depth: int) -> list[list[tuple[int, float]]]:
        vectors = self.index.vectors
        if vectors is None:
            return [[] for _ in queries]
        if self._embedder is None:
            from fastrag.embed import Embedder

            self._embedder = Embedder.resolve(self.models_dir)
            if self.index.embed_model and self._embedder.model_id != self.index.embed_model:
                raise UserError("the embedding model differs from the one that built the index: re-run `index`")
        return vectors.search(self._embedder.embed_queries(queries), depth)


def clean_query(query: str) -> str:
    """``query`` as valid Unicode: blank becomes empty, undecodable bytes become U+FFFD.

    Arguments with non-UTF-8 bytes reach Python as lone surrogates (``surrogateescape``), and
    JSON may spell lone surrogates too; neither can cross into Rust as UTF-8.
    """
    if not query.strip():
        return ""
    try:
        query.encode("utf-8")
        return query
    except UnicodeEncodeError:
        try:
            raw = query.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            raw = query.encode("utf-8", "replace")
        return raw.decode("utf-8", "replace")


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
