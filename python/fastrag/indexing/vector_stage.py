"""The vector stage of a build: what the embedding cache lacks is embedded once the lexical generation is
live, and published as the next generation.

Why two generations: embedding is the slow part of a build with vectors, while BM25 and everything else
lexical is ready in seconds (benches/RESULTS.md, "Time to first search"). So
:func:`fastrag.indexing.builder.finish_index` first publishes the lexical generation, with the vectors the
cache already holds and ``vectors_pending`` (the chunks still without one) in its manifest; searches answer
from it at once, ranking by words the chunks that have no vector yet. This module then embeds the rest,
saving the cache after every slice (a crash loses at most one), and the builder publishes the same lexical
files with the whole vector index as the next generation (:func:`write_successor`), unless another build
published meanwhile (the last wins; its next build finds these vectors in the cache).

Status: while the stage runs, :data:`PROGRESS_FILE` in the index folder says for which generation, in
which process, how far (or why it failed); :func:`vector_status` reads it with the live manifest.

Bad input: a text the model cannot encode (:func:`unencodable`: lone surrogates, binary-looking, a line
longer than :data:`MAX_LINE_CHARS`), or one the embedder returns no usable vector for (a zero or
non-finite row), is cached as a zero vector, left out of the vector index and counted (manifest
``vectors_skipped``): never embedded again, never a failed build.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm import tqdm

from fastrag.config import OV_CACHE_DIR_NAME
from fastrag.errors import UserError
from fastrag.indexing.generations import (
    CHECKSUMS_KEY,
    GENERATION_MARKER,
    MANIFEST_FILE,
    SELF_CHECKSUM_KEY,
    file_fingerprint,
    index_lock,
    read_manifest,
    seal_manifest,
)
from fastrag.indexing.storage import write_json_atomic
from fastrag.indexing.vectors import DIM

if TYPE_CHECKING:
    from fastrag.indexing.embed import ModelFiles, TextEmbedder
    from fastrag.indexing.vectors import EmbeddingCache, VectorIndex

__all__ = ["PROGRESS_FILE", "VectorStage", "unencodable", "vector_status", "write_successor"]

#: The stage's progress in the index folder: ``generation`` (the lexical one it completes), ``pid``,
#: ``total`` and ``done`` texts, ``error`` (why it stopped, else ``null``).
PROGRESS_FILE = "vectors.progress.json"
#: Texts embedded between two saves of the cache (and updates of the progress file): small enough that a
#: crash loses little and the status moves, large enough that the model's batches stay full.
SLICE = 256
#: A text with a line longer than this is not prose: minified code or data (chunks are cut far shorter).
MAX_LINE_CHARS = 20_000
#: A text whose share of control characters (or U+FFFD) exceeds this is binary-looking.
BINARY_SHARE = 0.1
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f\ufffd]")
_LONG_LINE = re.compile(rf"[^\n]{{{MAX_LINE_CHARS + 1}}}")
#: Files of a generation that the successor gets anew rather than linked.
_OWN_FILES = {MANIFEST_FILE, GENERATION_MARKER}


def unencodable(text: str) -> str | None:
    """Why the model cannot encode ``text`` (a few words), or ``None`` when it can."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "lone surrogates"
    if "\x00" in text or len(_CONTROL.findall(text)) > BINARY_SHARE * len(text):
        return "binary-looking"
    if _LONG_LINE.search(text):
        return f"a line over {MAX_LINE_CHARS} characters"
    return None


def usable(vectors: np.ndarray) -> np.ndarray:
    """Which rows of ``vectors`` are vectors the index can hold: finite and not all zero (a zero row is a
    text the model could not encode, kept in the cache so that it is never tried again)."""
    rows: np.ndarray = np.isfinite(vectors).all(axis=1) & (np.abs(vectors).sum(axis=1) > 0)
    return rows


@dataclass
class VectorStage:
    """The vectors of one build: which chunks (``chunk_ids``) get one, their texts and cache keys, the
    model's files (``None`` until resolved), the cache of that model, and the keys it lacks."""

    index_dir: Path
    chunk_ids: list[int]
    texts: list[str]
    keys: list[bytes]
    max_tokens: int
    files: ModelFiles | None = None
    cache: EmbeddingCache | None = None
    missing: list[bytes] = field(default_factory=list)

    @classmethod
    def prepare(
        cls,
        index_dir: Path,
        chunk_ids: list[int],
        texts: list[str],
        max_tokens: int,
        models_dir: Path,
        embedder: TextEmbedder | None,
    ) -> VectorStage:
        """The stage of ``texts`` with what the cache holds for the model on disk (found without fetching
        anything: a model that must be fetched or exported is resolved by :meth:`embed`, after the lexical
        generation is live)."""
        from fastrag.indexing.embed import find_model
        from fastrag.indexing.vectors import text_key

        keys = [text_key(t, max_tokens) for t in texts]
        stage = cls(index_dir, chunk_ids, texts, keys, max_tokens, missing=list(dict.fromkeys(keys)))
        files = embedder.files if embedder is not None else find_model(models_dir)
        if files is not None:
            try:
                stage._load_cache(files)
            except UserError:  # the model's files went missing: embed() names them
                stage.files = stage.cache = None
        return stage

    def _load_cache(self, files: ModelFiles) -> None:
        """Key the stage by the model of ``files``: load its cache, find what it lacks."""
        from fastrag.indexing.embed import model_fingerprint
        from fastrag.indexing.vectors import CACHE_FILE, EmbeddingCache

        try:
            model_id = model_fingerprint(files)
        except OSError as exc:
            raise UserError(f"cannot read the embedding model {files.model}: {exc.strerror or exc}") from exc
        self.files = files
        self.cache = EmbeddingCache.load(self.index_dir / CACHE_FILE, model_id)
        self.missing = self.cache.missing(self.keys)

    @property
    def model_id(self) -> str:
        """The fingerprint of the model whose vectors the stage holds, else ``""``."""
        return self.cache.model_id if self.cache is not None else ""

    @property
    def pending(self) -> int:
        """How many chunks have no vector yet."""
        wanted = set(self.missing)
        return sum(1 for k in self.keys if k in wanted)

    def index(self) -> tuple[VectorIndex | None, int]:
        """The vector index of the chunks whose vector the cache holds (``None`` when there is none), and
        how many of those the model could not encode (zero vectors: left out)."""
        from fastrag.indexing.vectors import VectorIndex

        if self.cache is None:
            return None, 0
        held = [(cid, k) for cid, k in zip(self.chunk_ids, self.keys) if k in self.cache.entries]
        if not held:
            return None, 0
        vectors = self.cache.vectors([k for _, k in held])
        good = usable(vectors)
        ids = np.array([cid for cid, _ in held], dtype=np.int64)[good]
        skipped = int(len(held) - good.sum())
        if not len(ids):
            return None, skipped
        return VectorIndex.build(ids, vectors[good]), skipped

    def save_cache(self) -> None:
        """Write the cache, restricted to this build's texts (drops the vectors of texts gone)."""
        from fastrag.indexing.vectors import CACHE_FILE

        if self.cache is None:
            return
        with index_lock(self.index_dir):  # an indexer publishing beside this one prunes temporary files
            self.cache.save(self.index_dir / CACHE_FILE, keep=self.keys)

    def cache_is_trim(self) -> bool:
        """Whether the cache holds exactly this build's texts (else :meth:`save_cache` prunes it)."""
        return self.cache is not None and len(self.cache.entries) == len(set(self.keys))

    def embed(
        self, generation: str, models_dir: Path, embedder: TextEmbedder | None, progress: bool
    ) -> tuple[int, int]:
        """Embed what the cache lacks, slice by slice, saving the cache and the progress after each; the
        texts the model ran on and those it cannot encode. A model that is missing or cannot be loaded is a
        one-line :class:`UserError` naming it. Why the stage stopped, if it did, is in the progress file."""
        try:
            return self._embed(generation, models_dir, embedder, progress)
        except BaseException as exc:
            self.note(generation, 0, 0, " ".join(str(exc).split()) or type(exc).__name__)
            raise

    def _embed(
        self, generation: str, models_dir: Path, embedder: TextEmbedder | None, progress: bool
    ) -> tuple[int, int]:
        """:meth:`embed`, without noting why it stopped."""
        from fastrag.indexing.embed import Embedder, resolve_model

        if self.files is None:
            self._load_cache(embedder.files if embedder is not None else resolve_model(models_dir))
        todo = dict(zip(self.keys, self.texts))
        bad = [k for k in self.missing if unencodable(todo[k]) is not None]
        refused_keys = set(bad)
        rest = [k for k in self.missing if k not in refused_keys]
        self.note(generation, len(rest), 0)
        model = embedder
        if rest and model is None:
            assert self.files is not None
            model = Embedder(self.files, cache_dir=models_dir / OV_CACHE_DIR_NAME)
        assert self.cache is not None
        self.cache.entries.update((k, np.zeros(DIM, dtype=np.float32)) for k in bad)
        refused = len(bad)
        with tqdm(total=len(rest), desc="embedding", unit="text", disable=not progress or not rest) as bar:
            for lo in range(0, len(rest), SLICE):
                part = rest[lo : lo + SLICE]
                assert model is not None
                fresh = np.asarray(model.embed([todo[k] for k in part], self.max_tokens), dtype=np.float32)
                made = usable(fresh)
                fresh[~made] = 0.0  # a vector the model could not make: kept as "cannot encode"
                refused += int((~made).sum())
                self.cache.entries.update(zip(part, fresh))
                self.save_cache()
                self.note(generation, len(rest), lo + len(part))
                bar.update(len(part))
        if bad and not rest:
            self.save_cache()
        self.missing = []
        return len(rest), refused

    def note(self, generation: str, total: int, done: int, error: str | None = None) -> None:
        """Record the stage's progress for :func:`vector_status` (best effort: skipped while another
        process writes into the index folder, and on a write error; the build goes on)."""
        note = {"generation": generation, "pid": os.getpid(), "total": total, "done": done, "error": error}
        note["updated"] = time.time()
        try:
            with index_lock(self.index_dir, wait=False) as held:
                if held:
                    write_json_atomic(self.index_dir / PROGRESS_FILE, note)
        except UserError:
            pass

    def finished(self, generation: str) -> None:
        """Remove the progress file if it is this stage's (of ``generation``): the vectors are published."""
        path = self.index_dir / PROGRESS_FILE
        with index_lock(self.index_dir):
            note = _read_progress(self.index_dir)
            if note.get("generation") == generation and note.get("pid") == os.getpid():
                path.unlink(missing_ok=True)


def write_successor(
    staging: Path, source: Path, vectors: VectorIndex | None, updates: dict[str, Any], replaced: set[str]
) -> None:
    """Fill ``staging`` with generation ``source``'s files (hard links: generations never change; a copy
    where links fail) but ``replaced`` and its manifest, then ``vectors``, then the manifest with
    ``updates``. A linked file that no longer matches ``source``'s manifest is a :class:`UserError`."""
    import shutil

    manifest = read_manifest(source)
    checksums: dict[str, str] = manifest[CHECKSUMS_KEY]
    for name, expected in checksums.items():
        if name in _OWN_FILES or name in replaced:
            continue
        target = staging / name
        try:
            os.link(source / name, target)
        except OSError:
            shutil.copy2(source / name, target)
        if file_fingerprint(target) != expected:
            raise UserError(f"the index in {source.parent} changed while its vectors were built ({name}): try again")
    if vectors is not None:
        vectors.save(staging)
    body = {k: v for k, v in manifest.items() if k not in (CHECKSUMS_KEY, SELF_CHECKSUM_KEY)}
    body.update(updates)
    body["created"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    seal_manifest(staging, body)


def _read_progress(index_dir: Path) -> dict[str, Any]:
    """The progress file's content, or ``{}`` when there is none or it cannot be read."""
    try:
        note = json.loads((index_dir / PROGRESS_FILE).read_bytes())
    except (OSError, ValueError):
        return {}
    return note if isinstance(note, dict) else {}


def _alive(pid: object) -> bool:
    """Whether process ``pid`` (of this machine) still runs."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, owned by another user
        return True
    return True


def vector_status(index_dir: Path, generation: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """Where the vectors of the live ``generation`` (with ``manifest``) stand, for ``index_status``.

    ``state``: ``lexical`` (the index asks for no vectors: lexical ranking), ``pending`` (asked, some
    chunks have none and no build is making them: the next ``index`` does; ``error`` says why the last
    one stopped, if it did), ``building`` (a build is embedding them: ``done`` of ``total``), ``ready``.
    Searches of a generation that is not ``ready`` rank by words the chunks that have no vector.
    """
    params = manifest.get("params")
    vectors = int(manifest.get("vectors") or 0)
    pending = int(manifest.get("vectors_pending") or 0)
    out: dict[str, Any] = {"vectors": vectors, "pending": pending, "skipped": int(manifest.get("vectors_skipped") or 0)}
    # an index of shards (no params of its own) has vectors when its shards do: each shard's build finished them
    embed = params.get("embed", "none") if isinstance(params, dict) else ("shards" if vectors else "none")
    if embed == "none":
        return {"state": "lexical", **out, "note": "lexical only: this index asks for no vectors"}
    if not pending:
        return {"state": "ready", **out, "note": f"vectors ready: {vectors} chunks"}
    note = _read_progress(index_dir)
    mine = note.get("generation") == generation
    if mine and note.get("error") is None and _alive(note.get("pid")):
        done, total = int(note.get("done") or 0), int(note.get("total") or 0)
        why = f"vectors building: {done} of {total} texts embedded; searches rank by words until they are published"
        return {"state": "building", **out, "done": done, "total": total, "note": why}
    error = note.get("error") if mine else None
    why = f"vectors pending: {pending} chunks have none yet (searches rank them by words); `fastrag index` builds them"
    return {"state": "pending", **out, "error": error, "note": why}
