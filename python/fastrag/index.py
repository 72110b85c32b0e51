"""Build, update and load the index: corpus → chunks → lexical index, on disk as generations.

Layout under the index directory::

    CURRENT            name of the live generation (replaced atomically)
    gen-<id>/          one complete index, never modified once published
        manifest.json  format version, parameters, counts
        chunks.json    the chunk table: display path per file, file/start/end per chunk
        files.json     per-file fingerprints and chunks, the cache of incremental indexing
        bm25.bin       the native BM25 index (magic, version, checksum)

A new index is written into a fresh generation folder and published by replacing
``CURRENT``; a crash at any point leaves the previous generation live and intact. The
previous generation is kept one round longer so that a reader that has just read ``CURRENT``
can still load it.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from fastrag import _core
from fastrag.chunking import Chunk, chunk_file
from fastrag.config import BM25_B, BM25_K1, CHUNK_TARGET_SIZE, MAX_CHUNK_SIZE
from fastrag.corpus import FileEntry, Skipped, content_hash, decode, walk
from fastrag.errors import UserError
from fastrag.storage import fsync_dir, write_bytes_atomic, write_json_atomic

#: Bumped whenever the on-disk layout or the chunk/token rules change; older indexes rebuild.
FORMAT_VERSION = 1
CURRENT_FILE = "CURRENT"
#: Fewer changed files than this are chunked in-process (a pool costs more than it saves).
POOL_THRESHOLD = 64


@dataclass(frozen=True, slots=True)
class IndexParams:
    """Everything that decides the content of an index; a change forces a full rebuild."""

    max_chunk_size: int = MAX_CHUNK_SIZE
    target_size: int = CHUNK_TARGET_SIZE
    k1: float = BM25_K1
    b: float = BM25_B
    stopwords: bool = True

    def as_dict(self) -> dict[str, Any]:
        """The parameters as a JSON-ready dict."""
        return {
            "max_chunk_size": self.max_chunk_size,
            "target_size": self.target_size,
            "k1": self.k1,
            "b": self.b,
            "stopwords": self.stopwords,
        }


@dataclass(slots=True)
class FileRecord:
    """A file of the index: where it is, its fingerprint and its chunks."""

    rel_path: str
    size: int
    mtime_ns: int
    digest: str
    chunks: list[Chunk]

    def to_json(self) -> list[Any]:
        """Compact JSON form: ``[size, mtime_ns, digest, [[start, end, context], ...]]``."""
        return [self.size, self.mtime_ns, self.digest, [[c.start, c.end, c.context] for c in self.chunks]]

    @classmethod
    def from_json(cls, rel_path: str, raw: list[Any]) -> FileRecord:
        """Inverse of :meth:`to_json`."""
        size, mtime_ns, digest, chunks = raw
        return cls(rel_path, size, mtime_ns, digest, [Chunk(s, e, c) for s, e, c in chunks])


@dataclass(slots=True)
class IndexReport:
    """What an ``index`` run did."""

    files: int
    chunks: int
    chunked: int
    reused: int
    removed: int
    skipped: list[Skipped] = field(default_factory=list)
    seconds: float = 0.0
    up_to_date: bool = False
    path: Path | None = None


# --------------------------------------------------------------------------- building


def build_index(
    repo_path: Path,
    index_dir: Path,
    params: IndexParams | None = None,
    *,
    display_root: str | None = None,
    progress: bool = True,
    workers: int | None = None,
) -> IndexReport:
    """Index the repository at ``repo_path`` into ``index_dir``, reusing what has not changed.

    ``display_root`` is the prefix of the paths reported in results (default: ``repo_path``
    relative to the working directory when it lies below it, else absolute).
    """
    params = params or IndexParams()
    started = time.perf_counter()
    if not repo_path.is_dir():
        what = "does not exist" if not repo_path.exists() else "is not a directory"
        raise UserError(f"repository path {repo_path} {what}")
    root = display_root if display_root is not None else display_prefix(repo_path)
    entries, skipped = walk(repo_path)
    if not entries:
        raise UserError(f"no indexable files under {repo_path}")

    previous = _load_previous(index_dir, params, root)
    records: dict[str, FileRecord] = {}
    to_chunk: list[FileEntry] = []
    for entry in entries:
        old = previous.get(entry.rel_path)
        if old is not None and old.size == entry.size and old.mtime_ns == entry.mtime_ns:
            records[entry.rel_path] = old
        else:
            to_chunk.append(entry)
    chunked = 0
    for entry, outcome in _chunk_files(repo_path, to_chunk, params, progress, workers):
        if isinstance(outcome, Skipped):
            skipped.append(outcome)
            continue
        old = previous.get(entry.rel_path)
        if old is not None and old.digest == outcome.digest:
            outcome = FileRecord(entry.rel_path, entry.size, entry.mtime_ns, old.digest, old.chunks)
        else:
            chunked += 1
        records[entry.rel_path] = outcome
    removed = sum(1 for rel in previous if rel not in records)
    reused = len(records) - chunked
    n_chunks = sum(len(r.chunks) for r in records.values())
    report = IndexReport(len(records), n_chunks, chunked, reused, removed, skipped)
    if not records:
        raise UserError(f"no readable text files under {repo_path}")
    fingerprints_same = previous.keys() == records.keys() and all(
        previous[k].mtime_ns == r.mtime_ns for k, r in records.items()
    )
    if chunked == 0 and removed == 0 and fingerprints_same:
        report.up_to_date = True
        report.path = _current_generation(index_dir)
        report.seconds = time.perf_counter() - started
        return report

    ordered = [records[k] for k in sorted(records)]
    docs = list(_indexed_texts(repo_path, ordered))
    bm25 = _core.Bm25Index.build(docs, k1=params.k1, b=params.b, stopwords=params.stopwords)
    report.path = _publish(index_dir, ordered, bm25, params, root, repo_path)
    report.seconds = time.perf_counter() - started
    return report


def display_prefix(repo_path: Path) -> str:
    """How result paths start: ``repo_path`` relative to the working directory if below it."""
    absolute = Path(os.path.abspath(repo_path))  # symlinks kept: the path the user named
    try:
        return absolute.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return absolute.as_posix()


def _chunk_files(
    repo_path: Path,
    entries: list[FileEntry],
    params: IndexParams,
    progress: bool,
    workers: int | None,
) -> Iterator[tuple[FileEntry, FileRecord | Skipped]]:
    """Read and chunk ``entries``, in worker processes when there are many."""
    jobs = [(str(repo_path / e.rel_path), e, params.max_chunk_size, params.target_size) for e in entries]
    bar = tqdm(total=len(jobs), desc="chunking", unit="file", disable=not progress or not jobs)
    n_workers = workers if workers is not None else min(os.cpu_count() or 1, 8)
    try:
        if len(jobs) < POOL_THRESHOLD or n_workers <= 1:
            for job in jobs:
                yield job[1], _chunk_one(job)
                bar.update()
        else:
            with ProcessPoolExecutor(max_workers=n_workers) as pool:
                for job, outcome in zip(jobs, pool.map(_chunk_one, jobs, chunksize=16)):
                    yield job[1], outcome
                    bar.update()
    finally:
        bar.close()


def _chunk_one(job: tuple[str, FileEntry, int, int]) -> FileRecord | Skipped:
    """Worker: read one file, fingerprint it and cut it into chunks."""
    path, entry, max_chunk_size, target_size = job
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        return Skipped(entry.rel_path, exc.strerror or "unreadable")
    text = decode(data)
    if text is None:
        return Skipped(entry.rel_path, "binary or not UTF-8")
    chunks = chunk_file(entry.rel_path, text, max_chunk_size, target_size)
    return FileRecord(entry.rel_path, entry.size, entry.mtime_ns, content_hash(data), chunks)


def _indexed_texts(repo_path: Path, records: Iterable[FileRecord]) -> Iterator[str]:
    """The text BM25 indexes for every chunk: relative path, context, then the span itself."""
    for record in records:
        text = (repo_path / record.rel_path).read_bytes().decode("utf-8")
        for c in record.chunks:
            yield f"{record.rel_path}\n{c.context}\n{text[c.start:c.end]}"


def _publish(
    index_dir: Path,
    records: list[FileRecord],
    bm25: _core.Bm25Index,
    params: IndexParams,
    root: str,
    repo_path: Path,
) -> Path:
    """Write a new generation and make it the live one; return its folder."""
    index_dir.mkdir(parents=True, exist_ok=True)
    gen_id = f"gen-{time.time_ns():x}-{os.getpid()}"
    staging = index_dir / f".{gen_id}.tmp"
    staging.mkdir()
    try:
        bm25.save(str(staging / "bm25.bin"))
        table = {
            "paths": [f"{root}/{r.rel_path}" if root else r.rel_path for r in records],
            "file": [i for i, r in enumerate(records) for _ in r.chunks],
            "start": [c.start for r in records for c in r.chunks],
            "end": [c.end for r in records for c in r.chunks],
        }
        write_json_atomic(staging / "chunks.json", table)
        write_json_atomic(staging / "files.json", {r.rel_path: r.to_json() for r in records})
        manifest = {
            "format_version": FORMAT_VERSION,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "repo_path": str(repo_path.resolve()),
            "display_root": root,
            "params": params.as_dict(),
            "files": len(records),
            "chunks": len(table["start"]),
        }
        write_json_atomic(staging / "manifest.json", manifest, indent=2)
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


def _current_generation(index_dir: Path) -> Path | None:
    try:
        name = (index_dir / CURRENT_FILE).read_text().strip()
    except OSError:
        return None
    path = index_dir / name
    return path if name.startswith("gen-") and path.is_dir() else None


def _load_previous(index_dir: Path, params: IndexParams, root: str) -> dict[str, FileRecord]:
    """The file cache of the live generation, if it was built compatibly; else empty."""
    gen = _current_generation(index_dir)
    if gen is None:
        return {}
    try:
        manifest = json.loads((gen / "manifest.json").read_text())
        if (
            manifest.get("format_version") != FORMAT_VERSION
            or manifest.get("params") != params.as_dict()
            or manifest.get("display_root") != root
        ):
            return {}
        raw = json.loads((gen / "files.json").read_text())
        return {rel: FileRecord.from_json(rel, rec) for rel, rec in raw.items()}
    except (OSError, ValueError, TypeError, KeyError):
        return {}


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
    gen = _current_generation(index_dir)
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
