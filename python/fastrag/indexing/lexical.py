"""The lexical indexes of a build: the BM25 indexes of the chunks, of the heading lines and of the
chunks' definitions.

A full build tokenizes the texts of every file (:func:`~fastrag.indexing.texts.indexed_texts`).
After an edit, most files are those of the live generation, unchanged: their documents are runs of
the live generation's indexes, and only the changed files' texts are read and tokenized (the
others are checked to have kept the size and modification time the walk saw). The core
joins the runs and the new documents (``Bm25Index.concat``) into the index a full build gives, array
for array, its statistics (document frequencies, count, average length) those of the whole. That is
what makes an edit searchable in about a second on vLLM (benches/RESULTS.md, "Freshness").

Documents are reused only from a generation whose texts were made the same way: its manifest
records :func:`texts_fingerprint` (the modules that make the texts, the core's tokenizer, the
text prefix), and the build's parameters must be the same (the caller checks those).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from fastrag import _core
from fastrag.indexing import sources, symbols, texts
from fastrag.indexing.corpus import check_unchanged
from fastrag.indexing.generations import CHUNKS_BM25, DEFINITIONS_BM25, HEADINGS_BM25
from fastrag.indexing.records import Base, FileRecord, IndexParams
from fastrag.indexing.texts import IndexedTexts, indexed_texts

__all__ = ["BM25_FILES", "LexicalIndexes", "lexical_indexes", "texts_fingerprint"]

#: The generation files of the three indexes, in the order of :data:`LexicalIndexes`.
BM25_FILES = (CHUNKS_BM25, HEADINGS_BM25, DEFINITIONS_BM25)

#: The chunks', the heading lines' and the definitions' BM25 indexes.
LexicalIndexes = tuple[_core.Bm25Index, _core.Bm25Index, _core.Bm25Index]


@dataclass(slots=True)
class _Run:
    """Documents of the base: chunks ``[chunk_start, chunk_stop)``, heading lines likewise."""

    chunk_start: int
    chunk_stop: int
    heading_start: int
    heading_stop: int


@cache
def _modules_digest() -> str:
    """What the texts depend on besides the data: the source of the modules that make them and
    the core's version (its tokenizer)."""
    digest = hashlib.sha256(_core.__version__.encode())
    for module in (texts, symbols, sources):
        if module.__file__ is not None:
            digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()


def texts_fingerprint(prefix: str) -> str:
    """The fingerprint a generation's manifest records of how its BM25 texts were made."""
    return hashlib.sha256(f"{_modules_digest()}\n{prefix}".encode()).hexdigest()[:32]


def lexical_indexes(
    repo_path: Path, records: list[FileRecord], params: IndexParams, prefix: str, base: Base | None
) -> LexicalIndexes:
    """The three BM25 indexes of ``records`` (in path order): runs of ``base``'s indexes for the
    files it holds unchanged and the others' texts tokenized, or every file's texts when there is no
    base or it cannot be read (a damaged file is rebuilt, never an error)."""
    if base is not None:
        try:
            spliced = _spliced(repo_path, records, params, prefix, base)
        except (OSError, ValueError, _core.IndexFormatError):
            spliced = None
        if spliced is not None:
            return spliced
    return _built(indexed_texts(repo_path, records, prefix, params.heading_body), params)


def _built(docs: IndexedTexts, params: IndexParams) -> LexicalIndexes:
    """The three indexes of ``docs``, built by the core (definitions keep identifiers whole)."""
    chunks, headings, definitions = (
        _core.Bm25Index.build(
            texts_, k1=params.k1, b=params.b, stopwords=params.stopwords, parts=parts, stem=params.stem
        )
        for texts_, parts in ((docs.chunks, True), (docs.headings, True), (docs.definitions, False))
    )
    return chunks, headings, definitions


def _spliced(
    repo_path: Path, records: list[FileRecord], params: IndexParams, prefix: str, base: Base
) -> LexicalIndexes | None:
    """The indexes of ``records`` from ``base``'s runs and the changed files' new documents; ``None``
    when no file is reused (a full build is then as cheap)."""
    segments = _segments(records, base)
    if not any(isinstance(s, _Run) for s in segments):
        return None
    fresh_files = {r.rel_path for s in segments if isinstance(s, list) for r in s}
    for record in records:  # a reused file is not read again: one edited since the walk is refused
        if record.rel_path not in fresh_files:
            check_unchanged(repo_path / record.rel_path, record.size, record.mtime_ns)
    old = tuple(_core.Bm25Index.load(base.path / name) for name in BM25_FILES)
    pieces: tuple[list[tuple[_core.Bm25Index, int, int]], ...] = ([], [], [])
    for segment in segments:
        if isinstance(segment, _Run):
            pieces[0].append((old[0], segment.chunk_start, segment.chunk_stop))
            pieces[1].append((old[1], segment.heading_start, segment.heading_stop))
            pieces[2].append((old[2], segment.chunk_start, segment.chunk_stop))
            continue
        docs = indexed_texts(repo_path, segment, prefix, params.heading_body)
        fresh = _built(docs, params)
        sizes = (len(docs.chunks), len(docs.headings), len(docs.definitions))
        for kind, (index, size) in enumerate(zip(fresh, sizes)):
            pieces[kind].append((index, 0, size))
    chunks, headings, definitions = (_core.Bm25Index.concat(p) for p in pieces)
    return chunks, headings, definitions


def _segments(records: list[FileRecord], base: Base) -> list[_Run | list[FileRecord]]:
    """``records`` cut into runs of the base's documents (consecutive there too) and groups of
    files whose documents are new (changed, added, or no longer next to their neighbours)."""
    where: dict[str, tuple[str, int, int, int, int]] = {}
    chunk_at = heading_at = 0
    for rel, digest, n_chunks, n_headings in base.files:
        where[rel] = (digest, chunk_at, n_chunks, heading_at, n_headings)
        chunk_at += n_chunks
        heading_at += n_headings
    segments: list[_Run | list[FileRecord]] = []
    for record in records:
        found = where.get(record.rel_path)
        if found is None or (found[0], found[2], found[4]) != (record.digest, len(record.chunks), len(record.headings)):
            if segments and isinstance(segments[-1], list):
                segments[-1].append(record)
            else:
                segments.append([record])
            continue
        _, chunk_start, n_chunks, heading_start, n_headings = found
        last = segments[-1] if segments else None
        if isinstance(last, _Run) and last.chunk_stop == chunk_start and last.heading_stop == heading_start:
            last.chunk_stop += n_chunks
            last.heading_stop += n_headings
        else:
            segments.append(_Run(chunk_start, chunk_start + n_chunks, heading_start, heading_start + n_headings))
    return segments
