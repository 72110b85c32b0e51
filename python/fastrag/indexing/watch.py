"""Keep an index fresh: file events of a repository, debounced, become one incremental build each.

:class:`Watcher` follows the repository with ``watchfiles`` (the Rust ``notify`` crate): every change to a
file the indexer reads (an edit, a new, deleted or renamed file, a branch checkout) is noted as pending;
once no change has come for :data:`DEBOUNCE_MS` (or a burst has lasted :data:`MAX_GROUP_MS`), one
incremental :func:`~fastrag.indexing.builder.build_index` publishes a new generation (a burst of a
thousand changes is one build); with vectors to embed, the lexical one first, then the one with vectors
(:mod:`fastrag.indexing.vector_stage`; :meth:`Watcher.status` says which phase runs). Changes that
arrive during a build are picked up by the next one. A failed build leaves the previous generation live
and is reported in :meth:`Watcher.status`; the watcher keeps going. Readers (``search``, ``mcp``,
``serve``) follow the new generation as they follow any other (:class:`fastrag.server.live.LiveIndex`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastrag.errors import UserError
from fastrag.indexing.builder import build_index
from fastrag.indexing.corpus import SKIPPED_DIRS
from fastrag.indexing.languages import kept_out
from fastrag.indexing.records import IndexParams, IndexReport

__all__ = ["DEBOUNCE_MS", "Watcher"]

#: Quiet time after the last change before a build starts.
DEBOUNCE_MS = 150
#: Longest a burst of changes is grouped for before a build starts anyway.
MAX_GROUP_MS = 3000
#: How often the watcher checks for a stop.
STOP_POLL_MS = 100


def _indexed_change(repo: Path, path: str) -> bool:
    """Whether a change at ``path`` may concern a file the indexer reads: not in a hidden or skipped folder,
    not a file kept out whatever its content (the walk decides the rest: ignore files, text or not)."""
    try:
        rel = Path(path).relative_to(repo)
    except ValueError:
        return False
    parts = rel.parts
    if not parts or any(p in SKIPPED_DIRS or p.startswith(".") for p in parts[:-1]):
        return False
    return kept_out(parts[-1]) is None


class Watcher:
    """Follows ``repo_path`` and rebuilds ``index_dir`` incrementally after each burst of changes."""

    def __init__(
        self,
        repo_path: Path,
        index_dir: Path,
        params: IndexParams | None = None,
        *,
        display_root: str | None = None,
        debounce_ms: int = DEBOUNCE_MS,
        on_build: Callable[[IndexReport | UserError, int], None] | None = None,
        on_lexical: Callable[[IndexReport], None] | None = None,
    ) -> None:
        """Watch ``repo_path`` (absolute) for ``index_dir``; ``on_build(report or error, files changed)``
        after every build, ``on_lexical(report)`` when a build has published its lexical generation and
        goes on to embed the vectors it lacks (:func:`~fastrag.indexing.builder.finish_index`)."""
        self.repo = Path(os.path.abspath(repo_path))
        self.index_dir = index_dir
        self.params = params or IndexParams()
        self.display_root = display_root
        self.debounce_ms = debounce_ms
        self.on_build = on_build
        self.on_lexical = on_lexical
        #: What the build under way does: ``lexical`` (chunks, BM25, the first publication), then
        #: ``vectors`` when it embeds what the cache lacks; ``None`` between builds.
        self.phase: str | None = None
        self.builds = 0
        self.last_build: float | None = None
        self.last_error: str | None = None
        self.building = False
        self._pending: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def of_index(cls, index_dir: Path, **kwargs: Any) -> Watcher:
        """A watcher of the repository the live generation of ``index_dir`` was built from, with its
        parameters and display root (what ``index`` recorded in the manifest)."""
        from fastrag.indexing.generations import load_index

        manifest = load_index(index_dir).manifest
        repo = manifest.get("repo_path")
        if not isinstance(repo, str) or not repo:
            raise UserError(f"the index in {index_dir} does not record its repository: index it again")
        try:
            params = IndexParams(**manifest.get("params", {}))
        except TypeError:
            params = IndexParams()
        return cls(Path(repo), index_dir, params, display_root=manifest.get("display_root"), **kwargs)

    def status(self) -> dict[str, Any]:
        """How fresh the index is: watching or not, files changed but not yet indexed, the last build."""
        with self._lock:
            pending = sorted(self._pending)
        return {
            "watching": self._thread is not None and self._thread.is_alive(),
            "building": self.building,
            "phase": self.phase,
            "pending": pending[:100],
            "pending_count": len(pending),
            "builds": self.builds,
            "seconds_since_build": None if self.last_build is None else round(time.time() - self.last_build, 3),
            "last_error": self.last_error,
        }

    def build(self) -> IndexReport | UserError:
        """One incremental build now (the pending files are those it picks up)."""
        with self._lock:
            changed = len(self._pending)
            self._pending.clear()
            self.building = True
            self.phase = "lexical"
        try:
            outcome: IndexReport | UserError = build_index(
                self.repo,
                self.index_dir,
                self.params,
                display_root=self.display_root,
                progress=False,
                on_lexical=self._lexical_published,
            )
            self.last_error = None
        except UserError as exc:  # e.g. every file deleted, or no embedding model: the last generation stays live
            outcome = exc
            self.last_error = str(exc)
        finally:
            self.building = False
            self.phase = None
        self.builds += 1
        self.last_build = time.time()
        if self.on_build is not None:
            self.on_build(outcome, changed)
        return outcome

    def _lexical_published(self, report: IndexReport) -> None:
        """The build's lexical generation is live; its vectors come next."""
        self.phase = "vectors"
        if self.on_lexical is not None:
            self.on_lexical(report)

    def run(self) -> None:
        """Watch until :meth:`stop` (blocking): each debounced burst of indexed changes is one build."""
        import watchfiles

        for changes in watchfiles.watch(
            self.repo,
            debounce=MAX_GROUP_MS,  # the longest a burst is grouped for
            step=self.debounce_ms,  # the quiet time that ends a burst
            stop_event=self._stop,
            rust_timeout=STOP_POLL_MS,
            yield_on_timeout=False,
            raise_interrupt=False,
        ):
            relevant = {path for _, path in changes if _indexed_change(self.repo, path)}
            if not relevant:
                continue
            with self._lock:
                self._pending |= relevant
            self.build()

    def start(self) -> Watcher:
        """Watch in a background thread (daemon: it ends with the process)."""
        self._thread = threading.Thread(target=self.run, name="fastrag-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching (the build under way, if any, finishes)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
