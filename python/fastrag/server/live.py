"""The live index of a long-running process: loaded once, reloaded when ``CURRENT`` changes on disk.

Every request asks :meth:`LiveIndex.current`, which costs one ``stat`` of the ``CURRENT`` file while the
index is unchanged. When an indexer (``POST /index``, or ``fastrag index`` in another
process) publishes a new generation, the next request loads it; requests already running finish on
the generation they started with, which stays in memory, so nobody ever sees half of an index. An index
of shards (``index --repos``) is watched through its catalog ``shards.json`` instead, and loaded as one
(:func:`fastrag.indexing.catalog.open_index`); its files are read through each shard's own repository
(:class:`fastrag.indexing.sources.Sources`).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from fastrag.errors import UserError
from fastrag.indexing.catalog import CATALOG_FILE, live_name, open_index
from fastrag.indexing.generations import CURRENT_FILE
from fastrag.indexing.reading import NOT_INDEXED, FileRefused
from fastrag.indexing.sources import Sources
from fastrag.retrieval.filters import NO_FILTER, SearchFilter
from fastrag.retrieval.retriever import Hit, Retriever
from fastrag.server.errors import ApiError


@dataclass(frozen=True, slots=True)
class Live:
    """One loaded generation: its retriever, its name, the files it indexes and where they are (one
    repository, or one per shard)."""

    retriever: Retriever
    generation: str
    paths: frozenset[str]
    sources: Sources

    def search(self, query: str, k: int, mode: str, search_filter: SearchFilter = NO_FILTER) -> list[Hit]:
        """Search this generation (only the files ``search_filter`` accepts); safe on many threads at once
        (concurrent queries are embedded together)."""
        return self.retriever.search(query, k, mode, allowed=search_filter.mask(self.retriever.index))


class LiveIndex:
    """Keeps the live generation of ``index_dir`` loaded and notices when another one is published."""

    def __init__(self, index_dir: Path, models_dir: Path) -> None:
        self.index_dir = index_dir
        self.models_dir = models_dir
        self.reloads = 0
        self._live: Live | None = None
        self._stamp: tuple[int, int, int] | None = None
        self._lock = threading.Lock()

    def _current_stamp(self) -> tuple[int, int, int] | None:
        catalog = self.index_dir / CATALOG_FILE  # a sharded index: replaced by every `index --repos`
        try:
            st = os.stat(catalog if catalog.exists() else self.index_dir / CURRENT_FILE)
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def current(self) -> Live:
        """The live generation, loaded now if ``CURRENT`` changed; :class:`ApiError` 503 when there is none."""
        stamp = self._current_stamp()
        live = self._live
        if live is not None and stamp == self._stamp:
            return live
        with self._lock:
            if self._live is not None and stamp == self._stamp:
                return self._live
            try:
                name = live_name(self.index_dir)
            except UserError as exc:
                raise ApiError(503, str(exc)) from exc
            if name is None:
                hint = "build it with POST /index or `fastrag index`"
                raise ApiError(503, f"no index in {self.index_dir}: {hint}")
            if self._live is None or name != self._live.generation:
                try:
                    loaded = open_index(self.index_dir)
                    if loaded.has_vectors:
                        _ = loaded.vectors  # now: the generation's folder may be pruned while it is live here
                except UserError as exc:
                    raise ApiError(503, str(exc)) from exc
                retriever = Retriever(loaded, self.models_dir)
                try:
                    retriever.prepare_vectors()  # now, not while the first searches wait for it
                except UserError:
                    pass  # no usable model: lexical search still works; vector searches say why
                self._live = Live(
                    retriever,
                    loaded.path.name,
                    frozenset(loaded.chunks.paths),
                    Sources.of(loaded.manifest),
                )
                self.reloads += 1
            self._stamp = stamp
            return self._live

    @property
    def loaded(self) -> Live | None:
        """The generation in memory, without checking ``CURRENT`` (``None`` before the first load)."""
        return self._live

    def locate(self, file_path: str) -> Path:
        """Where the file a result names is, through the generation in memory (any working directory;
        see :meth:`fastrag.indexing.sources.Sources.locate`); ``file_path`` as written before a load."""
        current = self._live
        return current.sources.locate(file_path) if current is not None else Path(file_path)

    def read(self, file_path: str) -> str:
        """The text of the file a result names, as the generation in memory indexed it
        (:meth:`fastrag.indexing.reading.IndexedFiles.text`); a :class:`FileRefused` otherwise."""
        current = self._live
        if current is None:
            raise FileRefused(file_path, NOT_INDEXED)
        return current.retriever.files.text(file_path)

    def corpus_roots(self) -> list[Path]:
        """The repositories of the generation in memory (one per shard of a sharded index; none before a
        load): checking a path never loads an index."""
        current = self._live
        return current.sources.repo_roots if current is not None else []

    def peek(self) -> Live | None:
        """The live generation if one can be loaded, else ``None`` (never raises a user error)."""
        try:
            return self.current()
        except ApiError:
            return None
