"""The vector half of the index: int8 chunk vectors in usearch, and the embedding cache.

Files of a generation (written by :meth:`VectorIndex.save`)::

    vectors.usearch   usearch index, dtype i8, cosine metric, keys = chunk ids of the chunk table
    vectors.npz       chunk ids, the float16 vectors used to re-score candidates, format stamp

Vectors are quantised here with rounding (``round(127 x)``; usearch itself would truncate).
A search takes the ``RESCORE_DEPTH``-times deeper int8 top list from usearch (exact search, no
graph: at the default ~800 docs vectors it costs ~0.05 ms per query in a batch) and re-ranks it
by the cosine of the float query with the float16 vectors. Measured on the public questions:
int8 alone agrees with exact float search on 97% of the top 10; re-scored, on 100%, for
~0.05 ms more per query (benches/RESULTS.md, section Vectors).

The embedding cache (:class:`EmbeddingCache`) lives in the index folder outside the
generations: ``embeddings.npz`` maps a digest of (model, token budget, embedded text) to its
float32 vector, so an unchanged chunk is never embedded twice.
"""

from __future__ import annotations

import ctypes
import hashlib
import io
import sys
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fastrag.errors import UserError
from fastrag.indexing.storage import write_bytes_atomic

#: Vector width (all-MiniLM-L6-v2).
DIM = 384
#: File names inside a generation.
USEARCH_FILE = "vectors.usearch"
ARRAYS_FILE = "vectors.npz"
#: Bumped when the vector files change meaning.
VECTOR_FORMAT = 1
#: int8 candidates fetched per result wanted, then re-scored with the float vectors.
RESCORE_DEPTH = 2
#: Vector hits below this cosine are dropped: no public docs question's truth is found below
#: 0.42, while nonsense queries ("asdfghjkl", "lorem ipsum") top out at 0.31 (benches/RESULTS.md).
MIN_COSINE = 0.4
#: Up to this many vectors, re-scoring multiplies the queries with all float vectors at once.
MATMUL_LIMIT = 8192
#: The embedding cache's file in the index folder (outside the generations).
CACHE_FILE = "embeddings.npz"
#: Size of a cache key (blake2b digest).
KEY_BYTES = 16


def _usearch_index() -> Any:
    """usearch's ``Index`` class, imported so that OpenVINO GenAI still loads after it.

    The usearch wheel carries its own static libstdc++. When it is the first C++ library of the
    process, a later ``import openvino_genai`` segfaults (its ``std::regex`` reaches locale
    facets that are not set up). Loading the system libstdc++ globally first — as importing
    OpenVINO first would, at ~1 ms instead of ~0.3 s — avoids it.
    """
    if sys.platform.startswith("linux") and "usearch.compiled" not in sys.modules:
        try:
            ctypes.CDLL("libstdc++.so.6", mode=ctypes.RTLD_GLOBAL)
        except OSError:  # no system libstdc++: nothing can clash with usearch's own
            pass
    from usearch.index import Index

    return Index


def quantize(vectors: np.ndarray) -> np.ndarray:
    """Unit float vectors → int8 ``round(127 x)`` (usearch would truncate instead)."""
    scaled = np.rint(np.asarray(vectors, dtype=np.float32) * 127.0)
    out: np.ndarray = np.clip(scaled, -127, 127).astype(np.int8)
    return out


class VectorIndex:
    """Chunk vectors for cosine search: usearch int8 candidates, float16 re-scoring."""

    def __init__(self, index: Any, chunk_ids: np.ndarray, floats: np.ndarray) -> None:
        """Wrap a usearch ``index`` whose keys are ``chunk_ids`` (use :meth:`build` or :meth:`load`).

        ``floats`` are the vectors as stored (float16), kept as float32 for re-scoring.
        """
        self._index = index
        self.chunk_ids = chunk_ids
        self._floats = np.asarray(floats, dtype=np.float16).astype(np.float32)
        self._sorted_rows = np.argsort(chunk_ids, kind="stable")  # chunk id → row, by binary search
        self._sorted_ids = chunk_ids[self._sorted_rows] if len(chunk_ids) else np.zeros(1, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.chunk_ids)

    @classmethod
    def build(cls, chunk_ids: np.ndarray, vectors: np.ndarray) -> VectorIndex:
        """Index ``vectors`` (``(n, 384)``, unit length) under the chunk ids ``chunk_ids``."""
        index_class = _usearch_index()
        ids = np.asarray(chunk_ids, dtype=np.int64)
        floats = np.asarray(vectors, dtype=np.float32)
        if floats.ndim != 2 or floats.shape[1] != DIM or len(ids) != len(floats):
            raise ValueError(f"expected {len(ids)} vectors of width {DIM}, got shape {floats.shape}")
        if len(np.unique(ids)) != len(ids) or (len(ids) and ids.min() < 0):
            raise ValueError("chunk ids must be distinct and non-negative")
        index = index_class(ndim=DIM, metric="cos", dtype="i8")
        if len(ids):
            index.add(ids.astype(np.uint64), quantize(floats), threads=1)  # one thread: the same file every time
        return cls(index, ids, floats.astype(np.float16))

    def save(self, folder: Path) -> None:
        """Write the two vector files into ``folder``, each atomically (temporary file + rename)."""
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{USEARCH_FILE}.tmp"
        self._index.save(str(tmp))
        tmp.replace(folder / USEARCH_FILE)
        buffer = io.BytesIO()
        floats = self._floats.astype(np.float16)
        np.savez(buffer, format=np.array([VECTOR_FORMAT, DIM]), chunk_ids=self.chunk_ids, floats=floats)
        write_bytes_atomic(folder / ARRAYS_FILE, buffer.getvalue())

    @classmethod
    def load(cls, folder: Path) -> VectorIndex:
        """Load the vector files of a generation; :class:`UserError` when missing or damaged."""
        index_class = _usearch_index()
        hint = "run `fastrag index` to rebuild it"
        path = folder / USEARCH_FILE
        try:
            with np.load(folder / ARRAYS_FILE, allow_pickle=False) as arrays:
                stamp = [int(x) for x in arrays["format"]]
                ids = np.asarray(arrays["chunk_ids"], dtype=np.int64)
                floats = np.asarray(arrays["floats"], dtype=np.float16)
            index = index_class.restore(str(path))
        except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile, RuntimeError) as exc:
            why = " ".join(str(exc).split())
            raise UserError(f"the vector index in {folder} is missing or damaged ({why}): {hint}") from exc
        if index is None:
            raise UserError(f"the vector index in {folder} is missing or damaged: {hint}")
        if (
            stamp != [VECTOR_FORMAT, DIM]
            or index.ndim != DIM
            or str(index.dtype).lower().rsplit(".", 1)[-1] != "i8"
            or len(index) != len(ids)
            or floats.shape != (len(ids), DIM)
        ):
            raise UserError(f"the vector index in {folder} is inconsistent: {hint}")
        return cls(index, ids, floats)

    def search(
        self, queries: np.ndarray, k: int, min_score: float = MIN_COSINE, allowed: bytes | None = None
    ) -> list[list[tuple[int, float]]]:
        """The ``k`` nearest chunks of every query row: ``(chunk_id, cosine)`` pairs, best first.

        Only chunks with a cosine of at least ``min_score`` are returned (see :data:`MIN_COSINE`;
        pass ``-1`` for all); a query that is all zeros (a blank question) gets no results.
        ``allowed``: one byte per chunk of the index, nonzero where the chunk may be returned.
        """
        q = np.atleast_2d(np.asarray(queries, dtype=np.float32))
        if q.shape[1] != DIM:
            raise ValueError(f"queries must have width {DIM}, got {q.shape}")
        out: list[list[tuple[int, float]]] = [[] for _ in range(len(q))]
        live = np.flatnonzero(np.linalg.norm(q, axis=1) > 0)
        if k <= 0 or not len(self) or not len(live):
            return out
        if allowed is not None:
            return self._search_allowed(q, live, k, min_score, allowed, out)
        keys, _, scores = self.candidates(q[live], min(len(self), k * RESCORE_DEPTH))
        return _best(out, live, keys, scores, k, min_score)

    def candidates(self, queries: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The ``depth`` nearest chunks of every (non-zero) query row by int8 distance: their chunk ids,
        int8 distances (``inf`` past a row's matches) and float cosines (``-inf`` there), nearest first."""
        found = self._index.search(quantize(queries), depth, exact=True)
        keys = np.asarray(found.keys, dtype=np.int64).reshape(len(queries), -1)
        distances = np.asarray(found.distances, dtype=np.float64).reshape(len(queries), -1)
        if hasattr(found, "counts"):  # BatchMatches; a single query gives Matches, already cut to its count
            counts = np.asarray(found.counts).reshape(-1)
        else:
            counts = np.full(1, keys.shape[1])
        valid = np.arange(keys.shape[1])[None, :] < counts[:, None]
        rows = np.searchsorted(self._sorted_ids, np.where(valid, keys, self._sorted_ids[0]))
        rows = self._sorted_rows[np.minimum(rows, len(self) - 1)]
        scores = np.where(valid, self._rescore(queries, rows), -np.inf)
        return np.where(valid, keys, -1), np.where(valid, distances, np.inf), scores

    def _search_allowed(
        self,
        q: np.ndarray,
        live: np.ndarray,
        k: int,
        min_score: float,
        allowed: bytes,
        out: list[list[tuple[int, float]]],
    ) -> list[list[tuple[int, float]]]:
        """:meth:`search` among the chunks ``allowed`` marks: exact float cosines of those rows only."""
        mask = np.frombuffer(allowed, dtype=np.uint8)
        ids = self.chunk_ids
        inside = ids < len(mask)
        rows = np.flatnonzero(inside & (mask[np.where(inside, ids, 0)] != 0))
        if not len(rows):
            return out
        scores = q[live] @ self._floats[rows].T
        top = min(k, len(rows))
        best = np.argpartition(-scores, top - 1, axis=1)[:, :top]
        for qi, cols, row_scores in zip(live.tolist(), best, scores):
            picked = sorted(((float(row_scores[c]), int(ids[rows[c]])) for c in cols), key=lambda p: (-p[0], p[1]))
            out[qi] = [(cid, s) for s, cid in picked if s >= min_score]
        return out

    def _rescore(self, queries: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Float cosines of ``queries`` with the candidate ``rows`` (one row of candidates per query)."""
        if len(self) <= MATMUL_LIMIT:  # one BLAS product with every vector beats gathering rows
            scores: np.ndarray = np.take_along_axis(queries @ self._floats.T, rows, axis=1)
            return scores
        parts = [
            np.einsum("qdc,qc->qd", self._floats[rows[lo : lo + 32]], queries[lo : lo + 32])
            for lo in range(0, len(queries), 32)
        ]
        return np.concatenate(parts)


def _best(
    out: list[list[tuple[int, float]]],
    live: np.ndarray,
    keys: np.ndarray,
    scores: np.ndarray,
    k: int,
    min_score: float,
) -> list[list[tuple[int, float]]]:
    """Fill ``out`` (rows ``live``) with each row's ``k`` best candidates by float cosine (``-inf``: none)
    of at least ``min_score``; among equal cosines the nearer int8 candidate first."""
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    best_keys = np.take_along_axis(keys, order, axis=1).tolist()
    best_scores = np.take_along_axis(scores, order, axis=1).tolist()
    for qi, ks, ss in zip(live.tolist(), best_keys, best_scores):
        out[qi] = [(c, s) for c, s in zip(ks, ss) if s != -np.inf and s >= min_score]
    return out


class ShardedVectors:
    """The vector indexes of several shards searched as one over their merged chunk table.

    ``parts``: each shard's first chunk id in the merged table and its :class:`VectorIndex`. A search
    ranks as :meth:`VectorIndex.search` over all the vectors at once: the int8 candidates are the nearest
    of every shard's by int8 distance (the same kernel on the same vectors: the same distances), re-scored
    with the float vectors; with a chunk mask, every allowed vector's exact cosine.
    """

    def __init__(self, parts: Sequence[tuple[int, VectorIndex]]) -> None:
        self.parts = list(parts)

    def __len__(self) -> int:
        return sum(len(v) for _, v in self.parts)

    def search(
        self, queries: np.ndarray, k: int, min_score: float = MIN_COSINE, allowed: bytes | None = None
    ) -> list[list[tuple[int, float]]]:
        """As :meth:`VectorIndex.search`, with chunk ids of the merged table."""
        q = np.atleast_2d(np.asarray(queries, dtype=np.float32))
        if q.shape[1] != DIM:
            raise ValueError(f"queries must have width {DIM}, got {q.shape}")
        out: list[list[tuple[int, float]]] = [[] for _ in range(len(q))]
        live = np.flatnonzero(np.linalg.norm(q, axis=1) > 0)
        parts = [(base, v) for base, v in self.parts if len(v)]
        if k <= 0 or not parts or not len(live):
            return out
        if allowed is not None:
            mask = np.frombuffer(allowed, dtype=np.uint8)
            found = [
                v.search(q, k, min_score, mask[base : base + int(v.chunk_ids.max()) + 1].tobytes()) for base, v in parts
            ]
            for qi in live.tolist():
                hits = [(cid + base, s) for (base, _), rows in zip(parts, found) for cid, s in rows[qi]]
                out[qi] = sorted(hits, key=lambda h: (-h[1], h[0]))[:k]
            return out
        depth = min(len(self), k * RESCORE_DEPTH)
        keys, distances, scores = [], [], []
        for base, v in parts:
            part_keys, part_distances, part_scores = v.candidates(q[live], min(len(v), depth))
            keys.append(np.where(part_keys >= 0, part_keys + base, -1))
            distances.append(part_distances)
            scores.append(part_scores)
        nearest = np.argsort(np.concatenate(distances, axis=1), axis=1, kind="stable")[:, :depth]
        all_keys = np.take_along_axis(np.concatenate(keys, axis=1), nearest, axis=1)
        all_scores = np.take_along_axis(np.concatenate(scores, axis=1), nearest, axis=1)
        return _best(out, live, all_keys, all_scores, k, min_score)


# --------------------------------------------------------------------------- embedding cache


def text_key(text: str, max_tokens: int) -> bytes:
    """The cache key of a text embedded with a token budget (a text with lone surrogates has one too)."""
    return hashlib.blake2b(f"{max_tokens}\0{text}".encode("utf-8", "surrogatepass"), digest_size=KEY_BYTES).digest()


class EmbeddingCache:
    """Vectors by :func:`text_key`, for one model; persisted as ``embeddings.npz``."""

    def __init__(self, model_id: str, entries: dict[bytes, np.ndarray] | None = None) -> None:
        self.model_id = model_id
        self.entries: dict[bytes, np.ndarray] = entries or {}

    @classmethod
    def load(cls, path: Path, model_id: str) -> EmbeddingCache:
        """The cache at ``path`` if it was made by ``model_id`` and is intact (its digest matches); an
        empty one otherwise: a damaged cache is dropped and its vectors embedded again (never fails)."""
        try:
            with np.load(path, allow_pickle=False) as arrays:
                if str(arrays["model"]) != model_id:
                    return cls(model_id)
                keys = np.asarray(arrays["keys"])
                vectors = np.asarray(arrays["vectors"], dtype=np.float32)
                digest = bytes(np.asarray(arrays["digest"], dtype=np.uint8))
            if (
                keys.dtype != np.uint8
                or keys.ndim != 2
                or keys.shape[1] != KEY_BYTES
                or vectors.shape != (len(keys), DIM)
                or digest != _cache_digest(model_id, keys, vectors)
            ):
                return cls(model_id)
            return cls(model_id, {k.tobytes(): v for k, v in zip(keys, vectors)})
        except (OSError, EOFError, ValueError, TypeError, KeyError, zipfile.BadZipFile):
            return cls(model_id)

    def missing(self, keys: Iterable[bytes]) -> list[bytes]:
        """The distinct keys of ``keys`` that have no vector yet, in first-seen order."""
        return [k for k in dict.fromkeys(keys) if k not in self.entries]

    def vectors(self, keys: Sequence[bytes]) -> np.ndarray:
        """The ``(len(keys), 384)`` vectors of ``keys`` (all must be present)."""
        if not keys:
            return np.zeros((0, DIM), dtype=np.float32)
        return np.stack([self.entries[k] for k in keys]).astype(np.float32)

    def save(self, path: Path, keep: Iterable[bytes] | None = None) -> None:
        """Write the cache atomically, restricted to ``keep`` when given (drops stale texts)."""
        keys = list(dict.fromkeys(keep)) if keep is not None else list(self.entries)
        keys = [k for k in keys if k in self.entries]
        buffer = io.BytesIO()
        key_array = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), KEY_BYTES)
        vectors = self.vectors(keys)
        digest = _cache_digest(self.model_id, key_array, vectors)
        np.savez(
            buffer,
            model=np.array(self.model_id),
            keys=key_array,
            vectors=vectors,
            digest=np.frombuffer(digest, dtype=np.uint8),
        )
        write_bytes_atomic(path, buffer.getvalue())


def _cache_digest(model_id: str, keys: np.ndarray, vectors: np.ndarray) -> bytes:
    """SHA-256 of a cache's model, keys and float32 vectors: any change to the file is noticed."""
    digest = hashlib.sha256(model_id.encode())
    digest.update(np.ascontiguousarray(keys, dtype=np.uint8).tobytes())
    digest.update(np.ascontiguousarray(vectors, dtype=np.float32).tobytes())
    return digest.digest()
