"""The index on disk: immutable generations and the ``CURRENT`` pointer.

Layout under the index directory::

    CURRENT            name of the live generation (replaced atomically)
    gen-<id>/          one complete index, never modified once published
        manifest.json  format version, parameters, counts
        chunks.json    the chunk table: display path per file, file/start/end per chunk
        files.json     per-file fingerprints and chunks, the cache of incremental indexing
        bm25.bin       the native BM25 index (magic, version, checksum)

A new index is written into a staging folder, renamed to its generation name and published by
replacing ``CURRENT``: a crash at any point leaves the previous generation live and intact,
and a reader never sees a mix of two indexes. The previous generation is kept one round
longer so that a reader that has just read ``CURRENT`` can still load it.

This module is all the search path needs to load an index; building lives in
:mod:`fastrag.index`.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastrag import _core
from fastrag.errors import UserError
from fastrag.storage import fsync_dir, write_bytes_atomic

#: Bumped whenever the on-disk layout or the chunk/token rules change; older indexes rebuild.
FORMAT_VERSION = 1
CURRENT_FILE = "CURRENT"


def publish(index_dir: Path, write: Callable[[Path], None]) -> Path:
    """Let ``write`` fill a fresh staging folder, then make it the live generation.

    Returns the generation's folder. On any failure the staging folder is removed and the
    previous generation stays live.
    """
    index_dir.mkdir(parents=True, exist_ok=True)
    gen_id = f"gen-{time.time_ns():x}-{os.getpid()}"
    staging = index_dir / f".{gen_id}.tmp"
    staging.mkdir()
    try:
        write(staging)
        fsync_dir(staging)
        final = index_dir / gen_id
        os.replace(staging, final)
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
    """Remove generations and abandoned staging folders other than ``keep``."""
    for path in index_dir.iterdir():
        stale_gen = path.name.startswith("gen-") and path.name not in keep
        stale_tmp = path.name.startswith(".gen-") and path.name.endswith(".tmp")
        if path.is_dir() and (stale_gen or stale_tmp):
            shutil.rmtree(path, ignore_errors=True)


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
class LoadedIndex:
    """A generation loaded for searching."""

    path: Path
    manifest: dict[str, Any]
    chunks: ChunkTable
    bm25: _core.Bm25Index


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
        bm25 = _core.Bm25Index.load(str(gen / "bm25.bin"))
    except UserError:
        raise
    except _core.IndexFormatError as exc:
        raise UserError(f"the index in {index_dir} is damaged ({exc})") from exc
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise UserError(f"the index in {index_dir} is unreadable ({exc}): {hint} again") from exc
    if bm25.num_docs != len(table) or not (len(table.file) == len(table.end) == len(table)):
        raise UserError(f"the index in {index_dir} is inconsistent: {hint} again")
    return LoadedIndex(gen, manifest, table, bm25)
