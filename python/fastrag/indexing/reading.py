"""The files of a loaded index, read as they were indexed: the one reader of every query-time consumer.

Search snippets, ``grep``, references, spans of the HTTP API and of MCP, prompts: each reads a file of the
index through :class:`IndexedFiles`, which opens it with :func:`~fastrag.indexing.corpus.read_source` (no
symbolic link at any component of its path under the repository, regular files only, at most
:data:`~fastrag.indexing.corpus.MAX_FILE_BYTES`, nothing blocks) and checks its content hash against the
one its generation recorded (``files.json``, checked against the manifest). A file that was swapped for a
link, a FIFO or a device, grew, changed or vanished since it was indexed is a :class:`FileRefused`
naming it relative to its repository: never the text of whatever is there now.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from fastrag.errors import UserError
from fastrag.indexing.corpus import read_indexed
from fastrag.indexing.generations import (
    CHECKSUMS_KEY,
    DIGESTS_TABLE,
    FILES_TABLE,
    SHARDS_KEY,
    LoadedIndex,
    read_manifest,
    verified_json,
)
from fastrag.indexing.sources import Sources, display_path

__all__ = ["FileRefused", "IndexedFiles", "refused_as_none"]

T = TypeVar("T")

#: Why a path gets no text: no root of the index names it, or its generation lists no content for it.
NOT_INDEXED = "not a file of the index"


class FileRefused(UserError):
    """A file of the index that is not read: ``rel_path`` (relative to its repository) and why."""

    def __init__(self, rel_path: str, reason: str) -> None:
        super().__init__(f"cannot read {rel_path}: {reason}")
        self.rel_path = rel_path
        self.reason = reason


def refused_as_none(read: Callable[[str], T], path: str) -> T | None:
    """``read(path)``, or ``None`` when the file is refused (:class:`FileRefused`): for a reader that shows
    what it can and leaves a refused file out."""
    try:
        return read(path)
    except FileRefused:
        return None


class IndexedFiles:
    """The texts of a loaded index's files (of every shard of a sharded one), read on first use, then kept.

    Safe on many threads: two that read one file at once both read it, and keep the same text.
    """

    def __init__(self, index: LoadedIndex) -> None:
        """The files of ``index``."""
        self.index = index
        self.sources = Sources.of(index.manifest)
        self._digests: dict[str, str] | None = None
        self._texts: dict[str, str] = {}

    def text(self, path: str) -> str:
        """The text of the file shown as ``path`` in results, as indexed; else :class:`FileRefused`."""
        found = self._texts.get(path)
        if found is None:
            found = self._texts.setdefault(path, self._read(path))
        return found

    def get(self, path: str) -> str | None:
        """:meth:`text`, or ``None`` when the file is refused."""
        return refused_as_none(self.text, path)

    def relative(self, path: str) -> str:
        """The path of ``path`` inside its repository (``path`` itself when no root of the index names it)."""
        return self.sources.relative(path) or path

    def _read(self, path: str) -> str:
        root = self.sources.root_of(path)
        rel = root.relative(path) if root is not None else None
        digest = self.digests().get(path)
        if root is None or root.repo_root is None or rel is None or digest is None:
            raise FileRefused(self.relative(path), NOT_INDEXED)
        try:
            return read_indexed(root.repo_root, rel, digest)
        except OSError as exc:
            raise FileRefused(rel, exc.strerror or "unreadable") from None

    def digests(self) -> dict[str, str]:
        """Every indexed file's content hash, by its path in results (``digests.json`` of each generation,
        or ``files.json`` in one written before it had one; checked against its manifest: a damaged one is
        a :class:`UserError`)."""
        if self._digests is None:
            shards = self.index.manifest.get(SHARDS_KEY)
            generations = (
                [(Path(str(s.get("generation"))), str(s.get("display_root") or "")) for s in shards]
                if isinstance(shards, list)
                else [(self.index.path, str(self.index.manifest.get("display_root") or ""))]
            )
            digests: dict[str, str] = {}
            for folder, root in generations:
                manifest = read_manifest(folder)
                table = DIGESTS_TABLE if DIGESTS_TABLE in manifest[CHECKSUMS_KEY] else FILES_TABLE
                raw = verified_json(folder, manifest, table)
                try:
                    found = raw.items() if table == DIGESTS_TABLE else ((rel, rec[2]) for rel, rec in raw.items())
                    digests.update({display_path(root, rel): str(digest) for rel, digest in found})
                except (TypeError, IndexError, AttributeError) as exc:
                    raise UserError(f"the files table of {folder} is damaged ({exc}): run `fastrag index`") from exc
            self._digests = digests
        return self._digests
