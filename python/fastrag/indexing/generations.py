"""The index on disk: immutable generations and the ``CURRENT`` pointer.

Layout under the index directory::

    CURRENT            name of the live generation (replaced atomically)
    gen-<id>/          one complete index, never modified once published
        manifest.json  format version, parameters, counts
        chunks.json    the chunk table: display path per file, file/start/end per chunk
        files.json     per-file fingerprints and chunks, the cache of incremental indexing
        bm25.bin       the native BM25 index (magic, version, checksum)
        headings.json  the heading lines of Markdown / reST files: file/start/end per line
        headings.bin   their own BM25 index (questions that ask where something is documented)
        definitions.bin  a BM25 index of the names each chunk defines (one document per chunk)
        vectors.*      optional: int8 chunk vectors (see :mod:`fastrag.indexing.vectors`)
    embeddings.npz     vector cache of the builder, outside the generations (see :mod:`fastrag.indexing.builder`)

A new index is written into a staging folder, renamed to its generation name and published by
replacing ``CURRENT``: a crash at any point leaves the previous generation live and intact,
and a reader never sees a mix of two indexes. The previous generation is kept one round
longer so that a reader that has just read ``CURRENT`` can still load it.

This module is all the search path needs to load an index; building lives in
:mod:`fastrag.indexing.builder`.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastrag import _core
from fastrag.errors import UserError
from fastrag.faults import pause_point
from fastrag.indexing.storage import fsync_dir, write_bytes_atomic

if TYPE_CHECKING:
    from fastrag.indexing.vectors import ShardedVectors, VectorIndex

#: Bumped whenever the on-disk layout or the chunk/token rules change; older indexes rebuild.
FORMAT_VERSION = 3
CURRENT_FILE = "CURRENT"
CHUNKS_BM25 = "bm25.bin"
DEFINITIONS_BM25 = "definitions.bin"
HEADINGS_BM25 = "headings.bin"
HEADINGS_TABLE = "headings.json"
LOCK_FILE = ".lock"
#: Serialises the first loads of vector indexes (:attr:`LoadedIndex.vectors`).
_VECTORS_LOCK = threading.Lock()
#: The manifest of shards loaded as one index (:func:`fastrag.indexing.catalog.merge_shards`) lists them
#: under this key, in chunk order: per shard its name, ``display_root``, ``repo_path``, ``generation``
#: (folder), ``first_chunk`` (its first chunk's id in the merged table), ``chunks`` and ``vectors``.
SHARDS_KEY = "shards"


def publish(index_dir: Path, write: Callable[[Path], None]) -> Path:
    """Let ``write`` fill a fresh staging folder, then make it the live generation.

    Returns the generation's folder. On any failure the staging folder is removed and the
    previous generation stays live.
    """
    with index_lock(index_dir):
        gen_id = f"gen-{time.time_ns():x}-{os.getpid()}"
        staging = index_dir / f".{gen_id}.tmp"
        staging.mkdir()
        try:
            write(staging)
            fsync_dir(staging)
            pause_point("staged")
            final = index_dir / gen_id
            os.replace(staging, final)
            pause_point("renamed")
            write_bytes_atomic(index_dir / CURRENT_FILE, gen_id.encode())
            fsync_dir(index_dir)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        _prune(index_dir, keep={gen_id, *_previous_ids(index_dir, gen_id)})
    return final


def _previous_ids(index_dir: Path, newest: str) -> list[str]:
    """The generation published just before ``newest`` (kept for readers mid-load)."""
    gens = sorted(p.name for p in index_dir.glob("gen-*") if p.is_dir() and p.name != newest)
    return gens[-1:]


def _prune(index_dir: Path, keep: set[str]) -> None:
    """Remove generations other than ``keep`` and leftovers of interrupted runs.

    Runs under :func:`index_lock`, so no other writer's staging folder or temporary file is in
    flight: every write into ``index_dir`` takes that lock.
    """
    for path in index_dir.iterdir():
        stale_gen = path.name.startswith("gen-") and path.is_dir() and path.name not in keep
        leftover = path.name.startswith(".") and path.name.endswith(".tmp")
        if stale_gen or (leftover and path.is_dir()):
            shutil.rmtree(path, ignore_errors=True)
        elif leftover:
            path.unlink(missing_ok=True)


@contextmanager
def index_lock(index_dir: Path) -> Iterator[None]:
    """Serialise every write into ``index_dir`` across processes (POSIX advisory lock): the
    publications (:func:`publish`) and the embedding cache's saves.

    Two indexers may run at once; each publishes a whole generation in turn, the last wins. A
    publication removes the temporary files of interrupted runs (:func:`_prune`), so a file
    written into ``index_dir`` outside this lock could lose its temporary file before its rename.
    Not reentrant: a process that holds it must not take it again.
    """
    index_dir.mkdir(parents=True, exist_ok=True)
    with open(index_dir / LOCK_FILE, "a+b") as handle:
        try:
            import fcntl
        except ImportError:  # not POSIX: no advisory locks
            yield
            return
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def current_generation(index_dir: Path) -> Path | None:
    """The folder of the live generation, or ``None`` when there is none."""
    try:
        name = (index_dir / CURRENT_FILE).read_text().strip()
    except OSError:
        return None
    path = index_dir / name
    return path if name.startswith("gen-") and path.is_dir() else None


# --------------------------------------------------------------------------- loading


@dataclass(frozen=True, slots=True)
class ChunkTable:
    """Where every chunk of the index lies: file path and ``[start, end)`` offsets."""

    paths: list[str]
    file: list[int]
    start: list[int]
    end: list[int]

    def __len__(self) -> int:
        return len(self.start)

    def span(self, chunk_id: int) -> tuple[str, int, int]:
        """``(file_path, first_character_index, last_character_index)`` of a chunk."""
        return self.paths[self.file[chunk_id]], self.start[chunk_id], self.end[chunk_id]


@dataclass(frozen=True, slots=True)
class HeadingTable:
    """The heading lines of an index and their BM25 index (ids are positions in the table);
    paths are those of the :class:`ChunkTable`."""

    file: list[int]
    start: list[int]
    end: list[int]
    bm25: _core.Bm25Index

    def __len__(self) -> int:
        return len(self.start)


@dataclass(frozen=True, slots=True)
class LoadedIndex:
    """A generation loaded for searching.

    ``definitions``: one BM25 document per chunk holding the names it defines (its ``class`` /
    ``def`` / ``fn`` lines and those of its enclosing signatures; identifiers whole, not split).
    The vector index is loaded on first use of :attr:`vectors`, so that lexical search never
    imports usearch (nor the embedder's OpenVINO).
    """

    path: Path
    manifest: dict[str, Any]
    chunks: ChunkTable
    bm25: _core.Bm25Index
    headings: HeadingTable
    definitions: _core.Bm25Index
    _lazy: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def has_vectors(self) -> bool:
        """Whether the generation was built with vectors (``index --vectors`` other than ``none``)."""
        return int(self.manifest.get("vectors") or 0) > 0

    @property
    def embed_model(self) -> str:
        """Fingerprint of the model that made the vectors (:func:`~fastrag.indexing.embed.model_fingerprint`),
        else ``""``."""
        return str(self.manifest.get("embed_model") or "")

    @property
    def vectors(self) -> VectorIndex | ShardedVectors | None:
        """The vector index (loaded once, on first use), or ``None`` when there is none; of shards loaded
        as one, every shard's vectors searched as one (:class:`~fastrag.indexing.vectors.ShardedVectors`).

        Raises :class:`UserError` when the manifest announces vectors that are missing or damaged.
        """
        if not self.has_vectors:
            return None
        vectors: VectorIndex | ShardedVectors | None = self._lazy.get("vectors")
        if vectors is None:
            with _VECTORS_LOCK:  # searches on many threads: one load (numpy's header parsing is not thread-safe)
                self._load_vectors()
            vectors = self._lazy["vectors"]
        return vectors

    def _load_vectors(self) -> None:
        """Load the vector index into the lazy slot, unless another thread just did (under :data:`_VECTORS_LOCK`)."""
        if "vectors" not in self._lazy:
            shards = self.manifest.get(SHARDS_KEY)
            if isinstance(shards, list):
                from fastrag.indexing.vectors import ShardedVectors

                parts = [
                    (int(s["first_chunk"]), load_vectors(Path(s["generation"]), int(s["vectors"]), int(s["chunks"])))
                    for s in shards
                    if int(s.get("vectors") or 0) > 0
                ]
                self._lazy["vectors"] = ShardedVectors(parts)
            else:
                self._lazy["vectors"] = load_vectors(self.path, int(self.manifest["vectors"]), len(self.chunks))


def load_vectors(generation: Path, expected: int, chunks: int) -> VectorIndex:
    """The vector index of ``generation``: ``expected`` vectors of chunk ids below ``chunks``; else a
    :class:`UserError`."""
    from fastrag.indexing.vectors import VectorIndex

    index = VectorIndex.load(generation)
    if len(index) != expected or (len(index) and int(index.chunk_ids.max()) >= chunks):
        raise UserError(f"the vector index in {generation} does not match its chunk table: rebuild the index")
    return index


def load_index(index_dir: Path) -> LoadedIndex:
    """Load the live generation of ``index_dir``; a clear :class:`UserError` when impossible."""
    hint = "run `python -m fastrag index` to build it"
    gen = current_generation(index_dir)
    if gen is None:
        raise UserError(f"no index in {index_dir}: {hint}")
    try:
        manifest = json.loads((gen / "manifest.json").read_text())
        if manifest.get("format_version") != FORMAT_VERSION:
            raise UserError(f"the index in {index_dir} has an older format: {hint} again")
        raw = json.loads((gen / "chunks.json").read_text())
        table = ChunkTable(raw["paths"], raw["file"], raw["start"], raw["end"])
        bm25 = _core.Bm25Index.load(str(gen / CHUNKS_BM25))
        raw = json.loads((gen / HEADINGS_TABLE).read_text())
        headings = HeadingTable(raw["file"], raw["start"], raw["end"], _core.Bm25Index.load(str(gen / HEADINGS_BM25)))
        definitions = _core.Bm25Index.load(str(gen / DEFINITIONS_BM25))
    except UserError:
        raise
    except _core.IndexFormatError as exc:
        raise UserError(f"the index in {index_dir} is damaged ({exc})") from exc
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise UserError(f"the index in {index_dir} is unreadable ({exc}): {hint} again") from exc
    consistent = bm25.num_docs == definitions.num_docs == len(table) and len(table.file) == len(table.end) == len(table)
    consistent = consistent and headings.bm25.num_docs == len(headings) == len(headings.file) == len(headings.end)
    if not consistent or any(f >= len(table.paths) for f in headings.file):
        raise UserError(f"the index in {index_dir} is inconsistent: {hint} again")
    return LoadedIndex(gen, manifest, table, bm25, headings, definitions)
