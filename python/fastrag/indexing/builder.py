"""Build and update the index: corpus → chunks → lexical index → a new generation.

Incremental: a file whose size and modification time are unchanged is not read again; one
whose content hash is unchanged is not chunked again, and its BM25 documents are runs of the live
generation's indexes, joined with the changed files' new ones under the statistics of the whole
(:mod:`fastrag.indexing.lexical`: the index a full build gives, array for array). Changing any
:class:`IndexParams` field rebuilds everything. See :mod:`fastrag.indexing.generations` for the on-disk layout.

Vectors (``IndexParams.embed``, ``index --vectors``): the primary chunks of the selected kind of
file (default: Markdown/reST) are embedded as "file path, heading path, span" cut at
``embed_tokens`` tokens, and stored in the generation as an int8 vector index. Vectors are
cached by a digest of (model, token budget, embedded text) in ``<index_dir>/embeddings.npz``,
outside the generations, so an unchanged chunk is never embedded twice, whatever else changed;
the model is not even loaded when every vector is cached. What the cache lacks is embedded after
the lexical generation is published, and published as the next one
(:mod:`fastrag.indexing.vector_stage`): the first search never waits for the model.

A build is two steps, :func:`plan_index` (walk, fingerprints, chunking) and :func:`finish_index`
(lexical indexes, vectors, publication), so that a distributed build can embed the texts every
shard is missing in one batched stage between them (:mod:`fastrag.indexing.distributed`).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from fastrag.config import DEFAULT_MODELS_DIR, TABLE_WINDOW_SIZE
from fastrag.errors import UserError
from fastrag.faults import pause_point
from fastrag.indexing.chunking import Chunk, chunk_file
from fastrag.indexing.chunking.bridges import with_bridges
from fastrag.indexing.chunking.layers import heading_lines, markdown_layers
from fastrag.indexing.corpus import (
    FileEntry,
    Skipped,
    content_hash,
    read_indexed_text,
    read_source,
    skipped_summary,
    text_of,
    walk,
)
from fastrag.indexing.generations import (
    CHUNKS_TABLE,
    DIGESTS_TABLE,
    FILES_TABLE,
    FORMAT_VERSION,
    HEADINGS_TABLE,
    SYMBOLS_TABLE,
    claim_index_dir,
    clean_leftovers,
    current_generation,
    publish,
    publish_successor,
    read_manifest,
    seal_manifest,
    verified_json,
    verify_generation,
)
from fastrag.indexing.ignores import IGNORED_BY
from fastrag.indexing.lexical import BM25_FILES, LexicalIndexes, lexical_indexes, texts_fingerprint
from fastrag.indexing.records import (
    DEFAULT_EMBED,
    DEFAULT_EMBED_TOKENS,
    EMBED_MODES,
    Base,
    EmbedSpec,
    FileRecord,
    IndexParams,
    IndexPlan,
    IndexReport,
    files_table,
)
from fastrag.indexing.sources import display_path
from fastrag.indexing.storage import ensure_writable, write_bytes_atomic, write_json_atomic
from fastrag.indexing.symbols import file_symbols, symbols_table
from fastrag.indexing.workers import worker_pool

__all__ = [
    "DEFAULT_EMBED",
    "DEFAULT_EMBED_TOKENS",
    "EMBED_MODES",
    "EmbedSpec",
    "FileRecord",
    "IndexParams",
    "IndexPlan",
    "IndexReport",
    "build_index",
    "display_prefix",
    "finish_index",
    "missing_texts",
    "plan_index",
    "primary_chunks",
    "vector_inputs",
]

if TYPE_CHECKING:
    from fastrag.indexing.embed import ModelFiles, TextEmbedder
    from fastrag.indexing.vector_stage import VectorStage
    from fastrag.indexing.vectors import VectorIndex

#: Fewer changed files than this are chunked in-process (a pool costs more than it saves).
POOL_THRESHOLD = 64


# --------------------------------------------------------------------------- building


def build_index(
    repo_path: Path,
    index_dir: Path,
    params: IndexParams | None = None,
    *,
    display_root: str | None = None,
    progress: bool = True,
    workers: int | None = None,
    models_dir: Path | None = None,
    embedder: TextEmbedder | None = None,
    text_prefix: str = "",
    ignore: bool = True,
    on_lexical: Callable[[IndexReport], None] | None = None,
) -> IndexReport:
    """Index the repository at ``repo_path`` into ``index_dir``, reusing what has not changed.

    ``display_root`` is the prefix of the paths reported in results (default: ``repo_path``
    relative to the working directory when it lies below it, else absolute). The embedding
    model is ``embedder`` if given, else resolved from ``models_dir`` (see
    :meth:`fastrag.indexing.embed.Embedder.resolve`) — and only loaded if some vector is not cached.
    ``text_prefix``: a folder prepended to each file's relative path in the text BM25 indexes (a
    shard's repository name, so that its chunks index as in one index over all the repositories).
    ``ignore``: leave out what the tree's ignore files name (:mod:`fastrag.indexing.ignores`).
    ``on_lexical(report)``: called once the lexical generation is live while vectors are still to be
    embedded (:func:`finish_index`).
    """
    plan = plan_index(
        repo_path,
        index_dir,
        params,
        display_root=display_root,
        progress=progress,
        workers=workers,
        text_prefix=text_prefix,
        ignore=ignore,
    )
    return finish_index(plan, models_dir=models_dir, embedder=embedder, progress=progress, on_lexical=on_lexical)


def plan_index(
    repo_path: Path,
    index_dir: Path,
    params: IndexParams | None = None,
    *,
    display_root: str | None = None,
    progress: bool = True,
    workers: int | None = None,
    text_prefix: str = "",
    ignore: bool = True,
) -> IndexPlan:
    """The first step of :func:`build_index` (same arguments): walk ``repo_path``, chunk what changed.

    When nothing changed, the plan's report says ``up_to_date`` and :func:`finish_index` publishes nothing.
    """
    params = params or IndexParams()
    params.embed_spec()  # an unknown --vectors mode fails before any work
    started = time.perf_counter()
    if not repo_path.is_dir():
        what = "does not exist" if not repo_path.exists() else "is not a directory"
        raise UserError(f"repository path {repo_path} {what}")
    if index_dir.exists() and not index_dir.is_dir():
        raise UserError(f"index directory {index_dir} is not a directory")
    ensure_writable(index_dir, "index directory")  # a read-only or full disk fails before any work
    claim_index_dir(index_dir)  # a folder of other files is refused before anything in it is removed
    clean_leftovers(index_dir)
    root = display_root if display_root is not None else display_prefix(repo_path)
    entries, skipped = _walk(repo_path, ignore, progress)
    if not entries:
        raise UserError(f"no indexable files under {repo_path}{_why(skipped)}")

    previous, base = _load_previous(index_dir, params, root, text_prefix, progress)
    records: dict[str, FileRecord] = {}
    to_chunk: list[FileEntry] = []
    for entry in entries:
        old = previous.get(entry.rel_path)
        if old is not None and old.size == entry.size and old.mtime_ns == entry.mtime_ns:
            records[entry.rel_path] = old
        else:
            to_chunk.append(entry)
    if progress and len(to_chunk) >= POOL_THRESHOLD:  # worth a line when it is worth a wait
        print(f"fastrag: {len(entries)} files under {repo_path}, {len(to_chunk)} to read", file=sys.stderr)
    chunked = 0
    for n, (entry, outcome) in enumerate(_chunk_files(repo_path, to_chunk, params, progress, workers)):
        if n == 0:
            pause_point("chunking")
        if isinstance(outcome, Skipped):
            skipped.append(outcome)
            continue
        old = previous.get(entry.rel_path)
        if old is not None and old.digest == outcome.digest:
            outcome = FileRecord(
                entry.rel_path, entry.size, entry.mtime_ns, old.digest, old.chunks, old.headings, outcome.symbols
            )
        else:
            chunked += 1
        records[entry.rel_path] = outcome
    pause_point("chunked")
    removed = sum(1 for rel in previous if rel not in records)
    reused = len(records) - chunked
    n_chunks = sum(len(r.chunks) for r in records.values())
    report = IndexReport(len(records), n_chunks, chunked, reused, removed, skipped)
    if not records:
        raise UserError(f"no readable text files under {repo_path}{_why(skipped)}")
    fingerprints_same = previous.keys() == records.keys() and all(
        previous[k].mtime_ns == r.mtime_ns for k, r in records.items()
    )
    if chunked == 0 and removed == 0 and fingerprints_same:
        report.up_to_date = True
        report.path = current_generation(index_dir)
    ordered = [records[k] for k in sorted(records)]
    report.seconds = time.perf_counter() - started
    return IndexPlan(repo_path, index_dir, params, root, text_prefix, ordered, report, base)


def finish_index(
    plan: IndexPlan,
    *,
    models_dir: Path | None = None,
    embedder: TextEmbedder | None = None,
    progress: bool = True,
    on_lexical: Callable[[IndexReport], None] | None = None,
) -> IndexReport:
    """The second step of :func:`build_index`: BM25, then publication.

    With vectors, in two generations (:mod:`fastrag.indexing.vector_stage`): the lexical one, with the
    vectors the cache already holds, searchable at once (``on_lexical(report)`` is called then, unless it
    is the whole build); then, once the rest is embedded (``embedder`` if given, else the model of
    ``models_dir``, loaded only if some vector is not cached), the same files with every vector. A model
    that is missing or cannot be loaded is a one-line :class:`UserError` raised after the lexical
    publication, which stays live. A build that finds its lexical generation live with vectors pending (a
    build stopped during its vectors) only finishes them.
    """
    report = plan.report
    spec = plan.params.embed_spec()
    started = time.perf_counter()
    models = models_dir if models_dir is not None else DEFAULT_MODELS_DIR
    stage: VectorStage | None
    if report.up_to_date:
        if spec is None or report.path is None or not int(read_manifest(report.path).get("vectors_pending") or 0):
            return report
        lexical = report.path
        report.up_to_date = False
        report.lexical_path = lexical
        stage = _stage(plan, spec, models, embedder)
    else:
        repo_path, index_dir, params, root, ordered = (
            plan.repo_path, plan.index_dir, plan.params, plan.root, plan.records
        )  # fmt: skip
        indexes = lexical_indexes(repo_path, ordered, params, plan.text_prefix, plan.base)
        stage = _stage(plan, spec, models, embedder) if spec is not None else None
        partial, skipped = stage.index() if stage is not None else (None, 0)
        pending = stage.pending if stage is not None else 0
        model_id = stage.model_id if partial is not None and stage is not None else ""
        extra = {"vectors_pending": pending, "vectors_skipped": skipped}
        lexical = publish(
            index_dir,
            lambda staging: _write_generation(
                staging, ordered, indexes, params, root, plan.text_prefix, repo_path, partial, model_id, extra
            ),
        )
        _remember(plan, lexical)
        report.path = report.lexical_path = lexical
        report.lexical_seconds = report.seconds + time.perf_counter() - started
        report.vectors = len(partial) if partial is not None else 0
        report.vectors_skipped, report.vectors_pending = skipped, pending
        if stage is None or not stage.missing:
            if stage is not None and not stage.cache_is_trim():
                stage.save_cache()
            report.seconds += time.perf_counter() - started
            return report
        stage.note(lexical.name, len(stage.missing), 0)  # index_status: vectors building, from now on
        if on_lexical is not None:
            on_lexical(report)
        pause_point("lexical")
    assert stage is not None
    _finish_vectors(plan, stage, lexical, models, embedder, progress)
    report.seconds += time.perf_counter() - started
    return report


def _stage(plan: IndexPlan, spec: EmbedSpec, models: Path, embedder: TextEmbedder | None) -> VectorStage:
    """The vector stage of ``plan``: the chunks ``spec`` embeds, and what the cache holds of them."""
    from fastrag.indexing.vector_stage import VectorStage

    chunk_ids, texts = vector_inputs(plan.repo_path, plan.records, spec, plan.text_prefix)
    return VectorStage.prepare(plan.index_dir, chunk_ids, texts, plan.params.embed_tokens, models, embedder)


def _finish_vectors(
    plan: IndexPlan,
    stage: VectorStage,
    lexical: Path,
    models: Path,
    embedder: TextEmbedder | None,
    progress: bool,
) -> None:
    """Embed what ``stage`` lacks and publish generation ``lexical`` again with every vector (unless another
    build has published since: its next build finds the vectors in the cache); into ``plan.report``."""
    from fastrag.indexing.vector_stage import write_successor
    from fastrag.indexing.vectors import ARRAYS_FILE, USEARCH_FILE

    report = plan.report
    embed_started = time.perf_counter()
    try:
        report.embedded, _ = stage.embed(lexical.name, models, embedder, progress)
    except UserError as exc:
        live = f"the lexical index {lexical.name} stays live: searches rank by words"
        raise UserError(f"{' '.join(str(exc).split())} ({live})") from exc
    vectors, skipped = stage.index()
    report.embed_seconds = time.perf_counter() - embed_started
    n_vectors = len(vectors) if vectors is not None else 0
    updates = {
        "vectors": n_vectors,
        "embed_model": stage.model_id if vectors is not None else "",
        "vectors_pending": 0,
        "vectors_skipped": skipped,
    }
    replaced = {USEARCH_FILE, ARRAYS_FILE}
    final = publish_successor(
        plan.index_dir, lexical, lambda staging: write_successor(staging, lexical, vectors, updates, replaced)
    )
    stage.finished(lexical.name)
    if final is not None:
        report.path = final
        _remember(plan, final)
    report.vectors = n_vectors
    report.vectors_skipped, report.vectors_pending = skipped, 0


def _remember(plan: IndexPlan, path: Path) -> None:
    """Note generation ``path`` as this process's latest publication of ``plan`` (see :data:`_PUBLISHED`)."""
    _PUBLISHED[plan.index_dir.resolve()] = _Published(
        path, plan.params, plan.root, texts_fingerprint(plan.text_prefix), plan.records, _Published.stat(path)
    )


def missing_texts(plan: IndexPlan, files: ModelFiles) -> list[str]:
    """The texts ``plan`` embeds (distinct, first-seen order) that its index's embedding cache lacks for
    the model of ``files``: what :func:`finish_index` would embed. Empty when it publishes nothing."""
    from fastrag.indexing.embed import model_fingerprint
    from fastrag.indexing.vectors import CACHE_FILE, EmbeddingCache, text_key

    spec = plan.params.embed_spec()
    if spec is None or plan.report.up_to_date:
        return []
    _, texts = vector_inputs(plan.repo_path, plan.records, spec, plan.text_prefix)
    cache = EmbeddingCache.load(plan.index_dir / CACHE_FILE, model_fingerprint(files))
    by_key = {text_key(t, plan.params.embed_tokens): t for t in texts}
    return [by_key[k] for k in cache.missing(by_key)]


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
    """Read and chunk ``entries``, in worker processes when there are many (see :mod:`fastrag.indexing.workers`)."""
    jobs = [(str(repo_path), e, params) for e in entries]
    bar = tqdm(total=len(jobs), desc="chunking", unit="file", disable=not progress or not jobs)
    n_workers = workers if workers is not None else min(os.cpu_count() or 1, 8)
    try:
        if len(jobs) < POOL_THRESHOLD or n_workers <= 1:
            for job in jobs:
                yield job[1], _chunk_one(job)
                bar.update()
        else:
            with worker_pool(n_workers) as pool:  # workers die with this process, Ctrl-C stops them at once
                for job, outcome in zip(jobs, pool.map(_chunk_one, jobs, chunksize=16)):
                    yield job[1], outcome
                    bar.update()
    finally:
        bar.close()


def _chunk_one(job: tuple[str, FileEntry, IndexParams]) -> FileRecord | Skipped:
    """Worker: read one file, fingerprint it and cut it into chunks."""
    root, entry, params = job
    try:
        data = read_source(Path(root), entry.rel_path)
    except OSError as exc:
        return Skipped(entry.rel_path, exc.strerror or "unreadable")
    text = text_of(entry.rel_path, data)
    if isinstance(text, Skipped):
        return text
    chunks = chunk_file(entry.rel_path, text, params.max_chunk_size, params.target_size)
    if params.bridges:
        chunks = with_bridges(text, chunks, params.max_chunk_size)
    if params.layers:
        chunks = chunks + markdown_layers(
            entry.rel_path, text, params.max_chunk_size, params.target_size, TABLE_WINDOW_SIZE, chunks
        )
    headings = heading_lines(entry.rel_path, text) if params.layers else []
    symbols = file_symbols(entry.rel_path, text)
    return FileRecord(entry.rel_path, entry.size, entry.mtime_ns, content_hash(data), chunks, headings, symbols)


def _why(skipped: list[Skipped]) -> str:
    """What an error about an empty tree adds: the skipped-files summary, if any, and how to index
    what ignore files leave out."""
    if not skipped:
        return ""
    hint = (
        "; --no_ignore indexes what ignore files leave out"
        if any(s.reason.startswith(IGNORED_BY) for s in skipped)
        else ""
    )
    return f" ({skipped_summary(sorted(skipped, key=lambda s: s.rel_path))}{hint})"


def primary_chunks(chunks: list[Chunk]) -> list[int]:
    """Indices of a file's primary chunks: the non-overlapping cover, without the bridges and
    the Markdown layers.

    Primary chunks and bridges come first, sorted by ``(start, end)``, and a bridge always starts
    inside the chunk before it; the layers (:func:`fastrag.indexing.chunking.layers.markdown_layers`) follow,
    all starting before the end of the last primary chunk. Keeping every chunk that starts at or
    after the end of the last kept one therefore drops exactly the bridges and the layers.
    """
    kept: list[int] = []
    end = -1
    for i, c in enumerate(chunks):
        if c.start >= end:
            kept.append(i)
            end = c.end
    return kept


def vector_inputs(
    repo_path: Path, records: Iterable[FileRecord], spec: EmbedSpec, prefix: str = ""
) -> tuple[list[int], list[str]]:
    """The chunk ids (positions in the chunk table) that ``spec`` embeds, and the text of each (whose
    path, when ``spec`` embeds it, is below ``prefix`` as in the BM25 texts)."""
    ids: list[int] = []
    texts: list[str] = []
    base = 0
    for record in records:
        if os.path.splitext(record.rel_path)[1].lower() in spec.suffixes:
            text = read_indexed_text(repo_path, record.rel_path, record.digest)
            chosen = range(len(record.chunks)) if spec.bridges else primary_chunks(record.chunks)
            for i in chosen:
                c = record.chunks[i]
                head = f"{display_path(prefix, record.rel_path)}\n" if spec.path else ""
                context = f"{c.context}\n" if c.context else ""
                ids.append(base + i)
                texts.append(f"{head}{context}{text[c.start : c.end]}")
        base += len(record.chunks)
    return ids, texts


def _write_generation(
    staging: Path,
    records: list[FileRecord],
    indexes: LexicalIndexes,
    params: IndexParams,
    root: str,
    text_prefix: str,
    repo_path: Path,
    vectors: VectorIndex | None = None,
    embed_model: str = "",
    extra: dict[str, Any] | None = None,
) -> None:
    """Write every file of a generation into ``staging`` (``indexes``: the BM25 indexes of the
    chunks, of the heading lines and of the chunks' definitions; ``extra``: more manifest keys)."""
    for index, name in zip(indexes, BM25_FILES):
        index.save(str(staging / name))
    if vectors is not None:
        vectors.save(staging)
    table: dict[str, list[Any]] = {
        "paths": [display_path(root, r.rel_path) for r in records],
        "file": [i for i, r in enumerate(records) for _ in r.chunks],
        "start": [c.start for r in records for c in r.chunks],
        "end": [c.end for r in records for c in r.chunks],
    }
    write_json_atomic(staging / CHUNKS_TABLE, table)
    heading_table = {
        "file": [i for i, r in enumerate(records) for _ in r.headings],
        "start": [c.start for r in records for c in r.headings],
        "end": [c.end for r in records for c in r.headings],
    }
    write_json_atomic(staging / HEADINGS_TABLE, heading_table)
    write_json_atomic(staging / SYMBOLS_TABLE, symbols_table([r.symbols or [] for r in records]))
    write_bytes_atomic(staging / FILES_TABLE, files_table(records).encode("utf-8"))
    # the content hashes alone: a query-time reader checks a file against them without parsing files.json
    write_json_atomic(staging / DIGESTS_TABLE, {r.rel_path: r.digest for r in records})
    manifest = {
        "format_version": FORMAT_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "repo_path": str(repo_path.resolve()),
        "display_root": root,
        "params": params.as_dict(),
        "texts": texts_fingerprint(text_prefix),
        "files": len(records),
        "chunks": len(table["start"]),
        "vectors": len(vectors) if vectors is not None else 0,
        "embed_model": embed_model,
        **(extra or {}),
    }
    seal_manifest(staging, manifest)


@dataclass(frozen=True, slots=True)
class _Published:
    """A generation this process published: its folder, how it was built (``texts``: the manifest's
    :func:`~fastrag.indexing.lexical.texts_fingerprint`), its records in order, and the size and
    modification time of each of its files (a file changed since is not taken on trust)."""

    path: Path
    params: IndexParams
    root: str
    texts: str
    records: list[FileRecord]
    files: tuple[tuple[str, int, int], ...]

    @staticmethod
    def stat(gen: Path) -> tuple[tuple[str, int, int], ...]:
        """The name, size and modification time of every file of ``gen``."""
        found = ((p.name, p.stat()) for p in gen.iterdir())
        return tuple(sorted((name, st.st_size, st.st_mtime_ns) for name, st in found))


#: The last generation this process published into each index folder. A generation does not change
#: once published, so the next build (a watcher's, after an edit) takes its records from here while
#: it is the live one and its files are as written, instead of reading and checking files.json
#: again; its BM25 files are still read with their checksums when reused.
_PUBLISHED: dict[Path, _Published] = {}


def _load_previous(
    index_dir: Path, params: IndexParams, root: str, text_prefix: str, progress: bool
) -> tuple[dict[str, FileRecord], Base | None]:
    """The file cache of the live generation, if it was built compatibly and is intact, and the
    generation as the base of the lexical indexes when its texts were made as this build makes them;
    else nothing (a damaged generation is rebuilt whole, and said so when ``progress``)."""
    try:
        gen = current_generation(index_dir)
        if gen is None:
            return {}, None
        mine = _PUBLISHED.get(index_dir.resolve())
        if mine is not None and mine.path.name == gen.name and mine.files == _Published.stat(gen):
            if (mine.params, mine.root) != (params, root):
                return {}, None
            same_texts = mine.texts == texts_fingerprint(text_prefix)
            return {r.rel_path: r for r in mine.records}, Base.of(gen, mine.records) if same_texts else None
        manifest = verify_generation(gen)
        if manifest.get("params") != params.as_dict() or manifest.get("display_root") != root:
            return {}, None
        raw = verified_json(gen, manifest, FILES_TABLE)
        records = {rel: FileRecord.from_json(rel, rec) for rel, rec in raw.items()}
        if any(r.symbols is None for r in records.values()):
            return {}, None  # built before definitions were kept: every file is parsed again, once
        same_texts = manifest.get("texts") == texts_fingerprint(text_prefix)
        return records, Base.of(gen, list(records.values())) if same_texts else None
    except UserError as exc:
        if progress and "older format" not in str(exc):
            print(f"fastrag: rebuilding the whole index, the live one cannot be reused ({exc})", file=sys.stderr)
        return {}, None
    except (ValueError, TypeError, KeyError, AttributeError):
        return {}, None


def _walk(repo_path: Path, ignore: bool, progress: bool) -> tuple[list[FileEntry], list[Skipped]]:
    """:func:`~fastrag.indexing.corpus.walk` with a count of the files seen on stderr (a large tree
    takes a while before the first file is read)."""
    bar = tqdm(desc="walking", unit="file", disable=not progress, delay=1.0, mininterval=0.5, leave=False)
    try:
        return walk(repo_path, ignore, on_file=bar.update)
    finally:
        bar.close()
