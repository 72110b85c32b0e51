"""Build and update the index: corpus → chunks → lexical index → a new generation.

Incremental: a file whose size and modification time are unchanged is not read again; one
whose content hash is unchanged is not chunked again. BM25 is refitted over all chunks since
its statistics (idf, average length) are global. Changing any :class:`IndexParams` field
rebuilds everything. See :mod:`fastrag.generations` for the on-disk layout.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from fastrag import _core
from fastrag.chunking import Chunk, chunk_file
from fastrag.chunking.bridges import with_bridges
from fastrag.config import BM25_B, BM25_K1, CHUNK_TARGET_SIZE, MAX_CHUNK_SIZE
from fastrag.corpus import FileEntry, Skipped, content_hash, decode, walk
from fastrag.errors import UserError
from fastrag.generations import FORMAT_VERSION, current_generation, publish
from fastrag.storage import write_json_atomic

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
    stem: bool = True
    bridges: bool = True

    def as_dict(self) -> dict[str, Any]:
        """The parameters as a JSON-ready dict."""
        return {
            "max_chunk_size": self.max_chunk_size,
            "target_size": self.target_size,
            "k1": self.k1,
            "b": self.b,
            "stopwords": self.stopwords,
            "stem": self.stem,
            "bridges": self.bridges,
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
        report.path = current_generation(index_dir)
        report.seconds = time.perf_counter() - started
        return report

    ordered = [records[k] for k in sorted(records)]
    docs = list(_indexed_texts(repo_path, ordered))
    bm25 = _core.Bm25Index.build(docs, k1=params.k1, b=params.b, stopwords=params.stopwords, stem=params.stem)
    report.path = publish(index_dir, lambda staging: _write_generation(staging, ordered, bm25, params, root, repo_path))
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
    jobs = [(str(repo_path / e.rel_path), e, params) for e in entries]
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


def _chunk_one(job: tuple[str, FileEntry, IndexParams]) -> FileRecord | Skipped:
    """Worker: read one file, fingerprint it and cut it into chunks."""
    path, entry, params = job
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        return Skipped(entry.rel_path, exc.strerror or "unreadable")
    text = decode(data)
    if text is None:
        return Skipped(entry.rel_path, "binary or not UTF-8")
    chunks = chunk_file(entry.rel_path, text, params.max_chunk_size, params.target_size)
    if params.bridges:
        chunks = with_bridges(text, chunks, params.max_chunk_size)
    return FileRecord(entry.rel_path, entry.size, entry.mtime_ns, content_hash(data), chunks)


def _indexed_texts(repo_path: Path, records: Iterable[FileRecord]) -> Iterator[str]:
    """The text BM25 indexes for every chunk: relative path, context, then the span itself."""
    for record in records:
        text = (repo_path / record.rel_path).read_bytes().decode("utf-8")
        for c in record.chunks:
            yield f"{record.rel_path}\n{c.context}\n{text[c.start : c.end]}"


def _write_generation(
    staging: Path, records: list[FileRecord], bm25: _core.Bm25Index, params: IndexParams, root: str, repo_path: Path
) -> None:
    """Write every file of a generation into ``staging``."""
    bm25.save(str(staging / "bm25.bin"))
    table: dict[str, list[Any]] = {
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


def _load_previous(index_dir: Path, params: IndexParams, root: str) -> dict[str, FileRecord]:
    """The file cache of the live generation, if it was built compatibly; else empty."""
    gen = current_generation(index_dir)
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
