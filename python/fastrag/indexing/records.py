"""The builder's records: what an index is asked to be (:class:`IndexParams`, :class:`EmbedSpec`),
what it keeps of every file (:class:`FileRecord`, the cache of incremental indexing), what a run
did (:class:`IndexReport`) and a build between its two steps (:class:`IndexPlan`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastrag.config import BM25_B, BM25_K1, CHUNK_TARGET_SIZE, HEADING_BODY_SIZE, MAX_CHUNK_SIZE
from fastrag.errors import UsageError, UserError
from fastrag.indexing.chunking import Chunk
from fastrag.indexing.corpus import Skipped
from fastrag.indexing.symbols import Symbol


@dataclass(frozen=True, slots=True)
class EmbedSpec:
    """Which chunks get a vector, and what text stands for each.

    ``suffixes``: the file kinds embedded. ``bridges``: also the overlapping bridge chunks
    (else only the primary, non-overlapping chunks). ``path``: the text starts with the file's
    relative path (then the chunk's context — its heading path — then the span).
    """

    suffixes: frozenset[str]
    bridges: bool = False
    path: bool = True


#: The values of ``IndexParams.embed`` (``index --vectors``). Chosen by measured recall against
#: indexing time on 2 cores (benches/vector_recall.py, benches/RESULTS.md section Vectors).
EMBED_MODES: dict[str, EmbedSpec | None] = {
    "none": None,
    "docs": EmbedSpec(frozenset({".md", ".markdown", ".rst"})),
    "docs+bridges": EmbedSpec(frozenset({".md", ".markdown", ".rst"}), bridges=True),
    "prose": EmbedSpec(frozenset({".md", ".markdown", ".rst", ".txt"})),
}
#: What `index` embeds unless told otherwise: nothing, a lexical index. With the ranker that reads what
#: a query asks for (:mod:`fastrag.retrieval.precision`), fusing vectors of the Markdown/reST chunks
#: (``docs``) cost pooled recall@5 out of fold at every fusion setting tried (docs .948 → .936, code
#: .968 → .948 at the shipped fusion; reworded questions .642 against .644), and embedding them added
#: ~4 s to a cold index and ~0.7 s of model loading to a search process (benches/RESULTS.md,
#: "Cross-validation by repository"). ``docs`` and the other modes stay for those who want them.
DEFAULT_EMBED = "none"
#: Token budget of an embedded text (special tokens included).
DEFAULT_EMBED_TOKENS = 128


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
    embed: str = DEFAULT_EMBED
    embed_tokens: int = DEFAULT_EMBED_TOKENS
    layers: bool = True
    heading_body: int = HEADING_BODY_SIZE

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
            "embed": self.embed,
            "embed_tokens": self.embed_tokens,
            "layers": self.layers,
            "heading_body": self.heading_body,
        }

    def embed_spec(self) -> EmbedSpec | None:
        """What :attr:`embed` selects (``None``: no vectors); :class:`UserError` for an unknown name."""
        if self.embed not in EMBED_MODES:
            raise UsageError(f"--vectors must be one of {', '.join(EMBED_MODES)}, got {self.embed!r}")
        if not 3 <= self.embed_tokens <= 256:
            raise UserError(f"the embedding token budget must be between 3 and 256, got {self.embed_tokens}")
        return EMBED_MODES[self.embed]


@dataclass(slots=True)
class FileRecord:
    """A file of the index: where it is, its fingerprint, its chunks, its heading lines
    (:func:`~fastrag.indexing.chunking.layers.heading_lines`, indexed apart from the chunks) and its
    definitions (:func:`~fastrag.indexing.symbols.file_symbols`; ``None`` in a record of an index
    built before they were kept: such an index is rebuilt)."""

    rel_path: str
    size: int
    mtime_ns: int
    digest: str
    chunks: list[Chunk]
    headings: list[Chunk] = field(default_factory=list)
    symbols: list[Symbol] | None = field(default_factory=list)
    #: The record's :meth:`to_json` form, once made or read (records are never changed: an
    #: unchanged file's record is written again as it was read).
    as_json: list[Any] | None = field(default=None, compare=False, repr=False)
    #: :attr:`as_json` as JSON text, once made (:meth:`json_text`).
    encoded: str | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> list[Any]:
        """Compact JSON form: ``[size, mtime_ns, digest, [[start, end, context], ...], [heading lines alike],
        [[name, kind, first, last, signature, parent], ...]]``."""
        if self.as_json is None:
            spans = [_spans_json(self.chunks), _spans_json(self.headings)]
            self.as_json = [self.size, self.mtime_ns, self.digest, *spans, [s.to_json() for s in self.symbols or []]]
        return self.as_json

    def json_text(self) -> str:
        """:meth:`to_json` as JSON text, made once: a watcher's next build writes an unchanged record again."""
        if self.encoded is None:
            self.encoded = json.dumps(self.to_json(), ensure_ascii=False)
        return self.encoded

    @classmethod
    def from_json(cls, rel_path: str, raw: list[Any]) -> FileRecord:
        """Inverse of :meth:`to_json` (a record without definitions gets ``symbols = None``)."""
        size, mtime_ns, digest, chunks, headings = raw[:5]
        symbols = [Symbol.from_json(s) for s in raw[5]] if len(raw) > 5 else None
        kept = raw if symbols is not None else None
        return cls(rel_path, size, mtime_ns, digest, _spans(chunks), _spans(headings), symbols, kept)


def files_table(records: Sequence[FileRecord]) -> str:
    """The files table, ``{rel_path: record's JSON form}`` as ``json.dumps`` writes it, from each record's
    :meth:`~FileRecord.json_text` (so an incremental build encodes only the records it made)."""
    items = (f"{json.dumps(r.rel_path, ensure_ascii=False)}: {r.json_text()}" for r in records)
    return "{" + ", ".join(items) + "}"


def _spans_json(chunks: list[Chunk]) -> list[list[Any]]:
    return [[c.start, c.end, c.context] for c in chunks]


def _spans(raw: list[list[Any]]) -> list[Chunk]:
    return [Chunk(s, e, c) for s, e, c in raw]


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
    vectors: int = 0
    embedded: int = 0
    embed_seconds: float = 0.0
    #: The generation published first, searchable while the vectors were built (see
    #: :mod:`fastrag.indexing.vector_stage`), and the seconds from the build's start until it was live.
    lexical_path: Path | None = None
    lexical_seconds: float = 0.0
    #: Chunks left without a vector: the model could not encode them (skipped), or, in a report of the
    #: lexical publication, not embedded yet (pending).
    vectors_skipped: int = 0
    vectors_pending: int = 0


@dataclass(frozen=True, slots=True)
class Base:
    """A live generation whose BM25 documents a build may reuse (:mod:`fastrag.indexing.lexical`): its
    folder and, in its order, each file's path, digest, chunk count and heading-line count."""

    path: Path
    files: list[tuple[str, str, int, int]]

    @classmethod
    def of(cls, path: Path, records: list[FileRecord]) -> Base:
        """The base of generation ``path``, whose files are ``records`` in the generation's order."""
        return cls(path, [(r.rel_path, r.digest, len(r.chunks), len(r.headings)) for r in records])


@dataclass(slots=True)
class IndexPlan:
    """A build between :func:`~fastrag.indexing.builder.plan_index` and
    :func:`~fastrag.indexing.builder.finish_index`: every file's chunks, in path order (plain data: it
    may travel to another process)."""

    repo_path: Path
    index_dir: Path
    params: IndexParams
    root: str
    text_prefix: str
    records: list[FileRecord]
    report: IndexReport
    #: The live generation whose BM25 documents the build reuses for unchanged files, if any.
    base: Base | None = None
