"""The index on disk: immutable generations and the ``CURRENT`` pointer.

Layout under the index directory::

    CURRENT            name of the live generation (replaced atomically)
    gen-<id>/          one complete index, never modified once published
        manifest.json  format version, parameters, counts, and a fingerprint of every other file
        chunks.json    the chunk table: display path per file, file/start/end per chunk
        files.json     per-file fingerprints and chunks, the cache of incremental indexing
        bm25.bin       the native BM25 index (magic, version, checksum)
        headings.json  the heading lines of Markdown / reST files: file/start/end per line
        headings.bin   their own BM25 index (questions that ask where something is documented)
        definitions.bin  a BM25 index of the names each chunk defines (one document per chunk)
        symbols.json   every definition: file, name, kind, lines, signature, parent (:mod:`fastrag.indexing.symbols`)
        digests.json   every file's content hash (what a query-time reader checks: :mod:`fastrag.indexing.reading`)
        vectors.*      optional: int8 chunk vectors (see :mod:`fastrag.indexing.vectors`)
    embeddings.npz     vector cache of the builder, outside the generations (see :mod:`fastrag.indexing.builder`)
    vectors.progress.json  how far the vector stage of a build is (:mod:`fastrag.indexing.vector_stage`)

A new index is written into a staging folder, renamed to its generation name and published by
replacing ``CURRENT``: a crash at any point leaves the previous generation live and intact,
and a reader never sees a mix of two indexes. A build with vectors publishes twice: the lexical
generation first (searchable at once), then the same files with the vectors
(:func:`publish_successor`, :mod:`fastrag.indexing.vector_stage`). The previous generation (the one ``CURRENT``
named before) is kept one round longer so that a reader that has just read ``CURRENT`` can
still load it; anything else (a generation a killed run renamed but never published, a staging
folder, a temporary file) is removed by the next run (:func:`clean_leftovers`).

Damage is never silent: the manifest carries its own SHA-256 and a fingerprint of every other
file of its generation (:func:`seal_manifest`): the SHA-256 of a JSON table or vector file, the
header of a file in the core's checksummed format (which holds the CRC32 of its payload, checked
on load). Every read of an index file goes through :func:`read_manifest` and :func:`verify_file`,
so a truncated, flipped or edited file is a one-line :class:`UserError`.

This module is all the search path needs to load an index; building lives in
:mod:`fastrag.indexing.builder`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastrag import _core
from fastrag.config import STALE_STAGING_S
from fastrag.errors import UserError
from fastrag.faults import pause_point
from fastrag.indexing.corpus import INDEX_MARKER
from fastrag.indexing.storage import fsync_dir, write_bytes_atomic, write_json_atomic
from fastrag.indexing.symbols import SYMBOL_COLUMNS

if TYPE_CHECKING:
    from fastrag.indexing.vectors import ShardedVectors, VectorIndex

#: Bumped whenever the on-disk layout or the chunk/token rules change; older indexes rebuild.
FORMAT_VERSION = 4
CURRENT_FILE = "CURRENT"
MANIFEST_FILE = "manifest.json"
CHUNKS_TABLE = "chunks.json"
FILES_TABLE = "files.json"
CHUNKS_BM25 = "bm25.bin"
DEFINITIONS_BM25 = "definitions.bin"
HEADINGS_BM25 = "headings.bin"
HEADINGS_TABLE = "headings.json"
SYMBOLS_TABLE = "symbols.json"
DIGESTS_TABLE = "digests.json"
LOCK_FILE = ".lock"
#: The marks of what ``index`` wrote: a file in the index folder (:data:`~fastrag.indexing.corpus.INDEX_MARKER`,
#: which the walk of a repository also honours), and one in each generation (written first, into its
#: staging folder). Nothing is removed from a folder without the first, and no
#: generation or staging folder without the second (or, made before marks existed, a manifest).
GENERATION_MARKER = ".fastrag-generation"
#: A temporary file of :func:`~fastrag.indexing.storage.write_bytes_atomic` (``.<name>.<8 random>.tmp``)
#: or of :func:`~fastrag.indexing.storage.ensure_writable`: the only files a run's clean-up removes.
_TEMPORARY_FILE = re.compile(r"\.[^/]+\.[A-Za-z0-9_]{8}\.tmp")
#: The name of a generation folder: ``gen-<time in ns, hex>-<pid>``.
GENERATION_NAME = re.compile(r"gen-[0-9a-f]+-[0-9]+")
#: Manifest keys: every other file's fingerprint, and the manifest's own SHA-256 (of its other keys).
CHECKSUMS_KEY = "checksums"
SELF_CHECKSUM_KEY = "manifest_sha256"
#: Files in the core's checksummed format start with this magic; their fingerprint is their header
#: (magic, version, payload length, CRC32 of the payload: see ``rust/store.rs``).
_CORE_MAGIC = b"FRBM25\0\x01"
_CORE_HEADER_BYTES = 24
#: What to do about an index that fails a check.
REBUILD_HINT = "run `fastrag index` to rebuild it"
#: Serialises the first loads of vector indexes (:attr:`LoadedIndex.vectors`).
_VECTORS_LOCK = threading.Lock()
#: The manifest of shards loaded as one index (:func:`fastrag.indexing.catalog.merge_shards`) lists them
#: under this key, in chunk order: per shard its name, ``display_root``, ``repo_path``, ``generation``
#: (folder), ``first_chunk`` (its first chunk's id in the merged table), ``chunks`` and ``vectors``.
SHARDS_KEY = "shards"


def publish(index_dir: Path, write: Callable[[Path], None]) -> Path:
    """Let ``write`` fill a fresh staging folder, then make it the live generation.

    Returns the generation's folder. On any failure the staging folder is removed and the
    previous generation stays live; a failed write (read-only or full disk) is a :class:`UserError`.
    Afterwards only the new generation and the one ``CURRENT`` named before remain (:func:`_prune`).
    """
    final = _publish(index_dir, write, None)
    assert final is not None
    return final


def publish_successor(index_dir: Path, predecessor: Path, write: Callable[[Path], None]) -> Path | None:
    """:func:`publish`, only while ``predecessor`` is the live generation (checked under the lock, so no
    other publication comes between); ``None``, nothing written, when another has replaced it since.

    What the vector stage publishes after the lexical generation it completes
    (:mod:`fastrag.indexing.vector_stage`): a newer build's generation is never replaced by an older one's.
    """
    return _publish(index_dir, write, predecessor.name)


def _publish(index_dir: Path, write: Callable[[Path], None], expected: str | None) -> Path | None:
    """:func:`publish`; with ``expected``, only while the live generation has that name."""
    claim_index_dir(index_dir)
    with index_lock(index_dir):
        previous = _live_name(index_dir)
        if expected is not None and previous != expected:
            return None
        gen_id = f"gen-{time.time_ns():x}-{os.getpid()}"
        staging = index_dir / f".{gen_id}.tmp"
        try:
            staging.mkdir()
            (staging / GENERATION_MARKER).write_bytes(b"fastrag generation\n")  # the mark: this folder is fastrag's
            write(staging)
            fsync_dir(staging)
            pause_point("staged")
            final = index_dir / gen_id
            os.replace(staging, final)
            pause_point("renamed")
            write_bytes_atomic(index_dir / CURRENT_FILE, gen_id.encode())
            fsync_dir(index_dir)
        except BaseException as exc:
            shutil.rmtree(staging, ignore_errors=True)
            if isinstance(exc, OSError):
                raise UserError(f"cannot write the index in {index_dir}: {exc.strerror or exc}") from exc
            raise
        _prune(index_dir, keep={gen_id, *([previous] if previous else [])})
    return final


def _live_name(index_dir: Path) -> str | None:
    """The generation ``CURRENT`` names, or ``None`` when there is none or it is damaged (never raises)."""
    try:
        gen = current_generation(index_dir)
    except UserError:
        return None
    return gen.name if gen is not None else None


def _prune(index_dir: Path, keep: set[str], min_age_s: float = 0.0) -> None:
    """Remove generations other than ``keep`` and leftovers of interrupted runs (staging folders,
    temporary files) at least ``min_age_s`` old.

    :func:`publish` runs it under :func:`index_lock` (age 0): no other writer's staging folder or
    temporary file is in flight, since every write into ``index_dir`` takes that lock.
    """
    if not (index_dir / INDEX_MARKER).is_file():  # not a folder fastrag marked: nothing in it is provably ours
        return
    now = time.time()
    for path in index_dir.iterdir():
        stale_gen = GENERATION_NAME.fullmatch(path.name) is not None and _is_generation(path) and path.name not in keep
        staging = path.name.startswith(".gen-") and path.name.endswith(".tmp") and _is_generation(path)
        temporary = _TEMPORARY_FILE.fullmatch(path.name) is not None and path.is_file() and not path.is_symlink()
        if not (stale_gen or staging or temporary):
            continue
        try:
            if min_age_s and now - path.lstat().st_mtime < min_age_s:
                continue
        except OSError:
            continue
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _is_generation(path: Path) -> bool:
    """Whether ``path`` is a folder fastrag wrote as a generation: it holds :data:`GENERATION_MARKER` (or,
    for one written before generations were marked, a manifest)."""
    if path.is_symlink() or not path.is_dir():
        return False
    return (path / GENERATION_MARKER).is_file() or (path / MANIFEST_FILE).is_file()


def claim_index_dir(index_dir: Path) -> None:
    """Make sure ``index_dir`` is fastrag's before anything is written or removed there: a new or empty
    folder (or one holding only what fastrag writes first: its lock, temporary files) gets the marker; an index built
    before folders were marked (a ``CURRENT`` naming a generation, or a shard catalog) gets it too; any
    other folder that holds files is refused with a :class:`UserError` (its files are never touched)."""
    marker = index_dir / INDEX_MARKER
    if marker.is_file():
        return
    try:
        names = {p.name for p in index_dir.iterdir()} if index_dir.is_dir() else set()
    except OSError as exc:
        raise UserError(f"cannot list the index directory {index_dir}: {exc.strerror or exc}") from exc
    # what another run claiming the folder at the same moment may have put there first is fastrag's too
    transient = {n for n in names if _TEMPORARY_FILE.fullmatch(n)} | {LOCK_FILE}
    # the marker listed now means another run claimed the folder between the check above and the listing
    ours = INDEX_MARKER in names or not (names - transient) or "shards.json" in names
    if not ours and CURRENT_FILE in names:
        try:
            live = (index_dir / CURRENT_FILE).read_text(encoding="utf-8").strip()
        except (OSError, ValueError):
            live = ""
        ours = GENERATION_NAME.fullmatch(live) is not None and _is_generation(index_dir / live)
    if not ours:
        raise UserError(
            f"{index_dir} holds other files and is not a fastrag index: choose a new or empty folder for the index"
        )
    try:
        index_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot write to index directory {index_dir}: {exc.strerror or exc}") from exc
    try:
        write_bytes_atomic(marker, b"fastrag index folder: fastrag writes and removes files here\n")
    except UserError:
        # the marker there means another run claimed the folder at the same moment (and swept our temporary file)
        if not marker.is_file():
            raise


def clean_leftovers(index_dir: Path) -> None:
    """Remove what killed runs left in ``index_dir``: generations renamed but never published (newer
    than the live one), staging folders, temporary files; the live generation and the one published
    before it stay.

    When no other process holds :func:`index_lock`, every leftover goes; while one does (it may be
    publishing now), only those older than :data:`~fastrag.config.STALE_STAGING_S` (the age rule of
    the model folders' staging).
    """
    if not index_dir.is_dir():
        return
    live = _live_name(index_dir)
    gens = sorted(p.name for p in index_dir.iterdir() if GENERATION_NAME.fullmatch(p.name) and p.is_dir())
    # names sort by publication time; with no readable CURRENT nothing is known to be an orphan
    keep = set(gens) if live is None else {live, *[g for g in gens if g < live][-1:]}
    with index_lock(index_dir, wait=False) as held:
        _prune(index_dir, keep, 0.0 if held else STALE_STAGING_S)


@contextmanager
def index_lock(index_dir: Path, *, wait: bool = True) -> Iterator[bool]:
    """Serialise every write into ``index_dir`` across processes (POSIX advisory lock): the
    publications (:func:`publish`) and the embedding cache's saves. Yields whether the lock is
    held: always when ``wait``; otherwise ``False`` while another process holds it.

    Two indexers may run at once; each publishes a whole generation in turn, the last wins. A
    publication removes the temporary files of interrupted runs (:func:`_prune`), so a file
    written into ``index_dir`` outside this lock could lose its temporary file before its rename.
    Not reentrant: a process that holds it must not take it again. A folder where the lock file
    cannot be written (read-only, not a folder) is a :class:`UserError`.
    """
    try:
        index_dir.mkdir(parents=True, exist_ok=True)
        handle = open(index_dir / LOCK_FILE, "a+b")  # noqa: SIM115 (closed by the with below)
    except OSError as exc:
        raise UserError(f"cannot write to index directory {index_dir}: {exc.strerror or exc}") from exc
    with handle:
        try:
            import fcntl
        except ImportError:  # not POSIX: no advisory locks
            yield True
            return
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def current_generation(index_dir: Path) -> Path | None:
    """The folder of the live generation, or ``None`` when there is none.

    A ``CURRENT`` that cannot be read, is not a generation's name, or names a folder that is gone is
    a :class:`UserError` (the index is damaged), never taken for "no index".
    """
    pointer = index_dir / CURRENT_FILE
    try:
        data = pointer.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise UserError(f"cannot read {pointer}: {exc.strerror or exc}") from exc
    name = data.decode("utf-8", errors="replace").strip()
    path = index_dir / name
    if not GENERATION_NAME.fullmatch(name) or not path.is_dir():
        shown = name[:40]
        raise UserError(f"the index in {index_dir} is damaged ({CURRENT_FILE} names no generation: {shown!r}): "
                        f"{REBUILD_HINT}")  # fmt: skip
    return path


# --------------------------------------------------------------------------- checksums


def file_fingerprint(path: Path) -> str:
    """What the manifest records of a file: ``sha256:<hex>``, or for a file in the core's checksummed
    format ``header:<hex>`` (its header holds the CRC32 the core checks on load: no second pass)."""
    with open(path, "rb") as handle:
        head = handle.read(_CORE_HEADER_BYTES)
        if head.startswith(_CORE_MAGIC) and len(head) == _CORE_HEADER_BYTES:
            return f"header:{head.hex()}"
        digest = hashlib.sha256(head)
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return f"sha256:{digest.hexdigest()}"


def _self_checksum(manifest: dict[str, Any]) -> str:
    body = {k: v for k, v in manifest.items() if k != SELF_CHECKSUM_KEY}
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=True).encode()).hexdigest()


def seal_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    """Write ``manifest`` into the generation ``folder`` with the fingerprint of every other file of
    the folder and its own checksum (the last file a generation gets)."""
    names = sorted(p.name for p in folder.iterdir() if p.is_file() and p.name != MANIFEST_FILE)
    sealed = {**manifest, CHECKSUMS_KEY: {name: file_fingerprint(folder / name) for name in names}}
    sealed[SELF_CHECKSUM_KEY] = _self_checksum(sealed)
    write_json_atomic(folder / MANIFEST_FILE, sealed, indent=2)


def _damaged(gen: Path, what: str) -> UserError:
    return UserError(f"the index in {gen.parent} is damaged ({gen.name}/{what}): {REBUILD_HINT}")


def _core_damage(gen: Path, exc: Exception) -> UserError:
    """:func:`_damaged` for a file the core refused: its message names the file by its whole path, which
    the generation's name already starts (``gen-…/bm25.bin``, not ``gen-…//…/gen-…/bm25.bin``)."""
    return _damaged(gen, " ".join(str(exc).replace(f"{gen}{os.sep}", "").split()))


def read_manifest(gen: Path) -> dict[str, Any]:
    """The manifest of generation ``gen``, checked against its own checksum; a :class:`UserError` when
    it is unreadable, damaged or of another format version."""
    try:
        manifest = json.loads((gen / MANIFEST_FILE).read_bytes())
    except OSError as exc:
        raise _damaged(gen, f"{MANIFEST_FILE}: {exc.strerror or exc}") from exc
    except (ValueError, RecursionError) as exc:  # not JSON, not UTF-8
        raise _damaged(gen, f"{MANIFEST_FILE} is not JSON") from exc
    if not isinstance(manifest, dict):
        raise _damaged(gen, f"{MANIFEST_FILE} is not an object")
    if manifest.get(SELF_CHECKSUM_KEY) != _self_checksum(manifest) or not isinstance(manifest.get(CHECKSUMS_KEY), dict):
        if manifest.get("format_version") != FORMAT_VERSION:
            raise UserError(f"the index in {gen.parent} has an older format: {REBUILD_HINT}")
        raise _damaged(gen, f"{MANIFEST_FILE} fails its checksum")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise UserError(f"the index in {gen.parent} has an older format: {REBUILD_HINT}")
    return manifest


def verify_file(gen: Path, manifest: dict[str, Any], name: str) -> Path:
    """The path of ``gen/name`` once its fingerprint matches the manifest's; else a :class:`UserError`."""
    expected = manifest[CHECKSUMS_KEY].get(name)
    if expected is None:
        raise _damaged(gen, f"{name} is not in the manifest")
    try:
        found = file_fingerprint(gen / name)
    except OSError as exc:
        raise _damaged(gen, f"{name}: {exc.strerror or exc}") from exc
    if found != expected:
        raise _damaged(gen, f"{name} fails its checksum")
    return gen / name


def verify_generation(gen: Path) -> dict[str, Any]:
    """The manifest of ``gen`` once every file it lists matches its fingerprint, a file in the core's
    format loaded too (its payload's CRC32): what ``index`` checks before reusing a generation, so that
    it rebuilds a damaged one; else a :class:`UserError`."""
    manifest = read_manifest(gen)
    for name, fingerprint in manifest[CHECKSUMS_KEY].items():
        path = verify_file(gen, manifest, str(name))
        if str(fingerprint).startswith("header:"):
            try:
                _core.Bm25Index.load(str(path))
            except _core.IndexFormatError as exc:
                raise _core_damage(gen, exc) from exc
    return manifest


def verified_json(gen: Path, manifest: dict[str, Any], name: str) -> Any:
    """The JSON table ``gen/name``, once checked against the manifest."""
    path = verify_file(gen, manifest, name)
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as exc:
        raise _damaged(gen, f"{name} is unreadable") from exc


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
class SymbolTable:
    """Every definition of a generation (columns of :data:`~fastrag.indexing.symbols.SYMBOL_COLUMNS`;
    ``file`` indexes the :class:`ChunkTable`'s paths, ``parent`` this table)."""

    file: list[int]
    name: list[str]
    kind: list[str]
    first: list[int]
    last: list[int]
    signature: list[str]
    parent: list[int]

    def __len__(self) -> int:
        return len(self.name)


def load_symbols(generation: Path, files: int, manifest: dict[str, Any]) -> SymbolTable:
    """The symbols table of ``generation`` (whose sealed manifest is ``manifest``, and whose chunk table has
    ``files`` paths), once checked against the manifest (:func:`verified_json`: a line number changed in a
    still valid JSON is damage, never a wrong answer); a :class:`UserError` when it is missing, damaged,
    unreadable or inconsistent."""
    hint = "run `fastrag index` again"
    raw = verified_json(generation, manifest, SYMBOLS_TABLE)
    try:
        table = SymbolTable(*(list(raw[column]) for column in SYMBOL_COLUMNS))
    except (ValueError, TypeError, KeyError) as exc:
        raise UserError(f"the definitions table of {generation.parent} is unreadable ({exc}): {hint}") from exc
    n = len(table)
    columns = (table.file, table.kind, table.first, table.last, table.signature, table.parent)
    if any(len(c) != n for c in columns) or any(not 0 <= f < files for f in table.file):
        raise UserError(f"the definitions table of {generation.parent} is inconsistent: {hint}")
    if any(not -1 <= p < n for p in table.parent):
        raise UserError(f"the definitions table of {generation.parent} is inconsistent: {hint}")
    return table


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
    def symbols(self) -> SymbolTable:
        """The generation's definitions (loaded once, on first use: a search reads them only to tell whether
        a direct question names something in code, ``Retriever.names_code``); a
        :class:`UserError` for an index of shards or one built before definitions were kept."""
        table: SymbolTable | None = self._lazy.get("symbols")
        if table is None:
            if isinstance(self.manifest.get(SHARDS_KEY), list):
                raise UserError("definitions, references and outlines need an index of one repository, not of shards")
            table = self._lazy.setdefault("symbols", load_symbols(self.path, len(self.chunks.paths), self.manifest))
        return table

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
    """The vector index of ``generation``, its files checked against its manifest: ``expected`` vectors
    of chunk ids below ``chunks``; else a :class:`UserError`."""
    from fastrag.indexing.vectors import ARRAYS_FILE, USEARCH_FILE, VectorIndex

    manifest = read_manifest(generation)
    for name in (ARRAYS_FILE, USEARCH_FILE):
        verify_file(generation, manifest, name)
    index = VectorIndex.load(generation)
    if len(index) != expected or (len(index) and int(index.chunk_ids.max()) >= chunks):
        raise UserError(f"the vector index in {generation} does not match its chunk table: {REBUILD_HINT}")
    return index


#: How many times a reader starts over when the generation it began to read was replaced meanwhile.
LOAD_ATTEMPTS = 5


def _pointer(index_dir: Path) -> bytes | None:
    """The bytes of ``CURRENT`` as they are now, or ``None`` when it cannot be read (never raises)."""
    try:
        return (index_dir / CURRENT_FILE).read_bytes()
    except OSError:
        return None


def load_index(index_dir: Path) -> LoadedIndex:
    """Load the live generation of ``index_dir``, every file checked against its manifest; a clear
    :class:`UserError` when impossible.

    A writer keeps the generation it replaced and prunes the one before it, so a reader slower than two
    publications can find the generation it began to read gone: when ``CURRENT`` changed while it read,
    it starts over on the new one; a failure of a generation still live is the index's damage.
    """
    for attempt in range(1, LOAD_ATTEMPTS + 1):
        pointer = _pointer(index_dir)
        try:
            gen = current_generation(index_dir)
            if gen is None:
                raise UserError(f"no index in {index_dir}: run `fastrag index` to build it")
            return _load_generation(gen)
        except UserError:
            if attempt == LOAD_ATTEMPTS or _pointer(index_dir) == pointer:
                raise
    raise AssertionError("unreachable: the last attempt returns or raises")


def _load_generation(gen: Path) -> LoadedIndex:
    """The generation ``gen`` loaded, every file checked against its manifest; else a :class:`UserError`."""
    manifest = read_manifest(gen)
    try:
        raw = verified_json(gen, manifest, CHUNKS_TABLE)
        table = ChunkTable(raw["paths"], raw["file"], raw["start"], raw["end"])
        bm25 = _core.Bm25Index.load(str(verify_file(gen, manifest, CHUNKS_BM25)))
        raw = verified_json(gen, manifest, HEADINGS_TABLE)
        heading_bm25 = _core.Bm25Index.load(str(verify_file(gen, manifest, HEADINGS_BM25)))
        headings = HeadingTable(raw["file"], raw["start"], raw["end"], heading_bm25)
        definitions = _core.Bm25Index.load(str(verify_file(gen, manifest, DEFINITIONS_BM25)))
    except _core.IndexFormatError as exc:
        raise _core_damage(gen, exc) from exc
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise _damaged(gen, f"unreadable: {' '.join(str(exc).split())}") from exc
    consistent = bm25.num_docs == definitions.num_docs == len(table) and len(table.file) == len(table.end) == len(table)
    consistent = consistent and headings.bm25.num_docs == len(headings) == len(headings.file) == len(headings.end)
    if not consistent or any(f >= len(table.paths) for f in headings.file):
        raise _damaged(gen, "its tables disagree")
    return LoadedIndex(gen, manifest, table, bm25, headings, definitions)
