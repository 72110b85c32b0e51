"""What the agent-facing commands and tools share: an index's files as results name them, read once
through :class:`~fastrag.indexing.reading.IndexedFiles` (as indexed, or refused), and a path argument
checked against them (``definitions``, ``references``, ``outline``, ``grep``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fastrag.errors import UsageError
from fastrag.indexing.corpus import Skipped
from fastrag.indexing.reading import FileRefused, IndexedFiles
from fastrag.retrieval.filters import SearchFilter

__all__ = ["IndexFiles"]


class IndexFiles:
    """The files of a loaded index: their names as results give them, where they are, their texts (cached),
    and those that could not be read (:attr:`refused`, each once, in the order met)."""

    def __init__(self, files: IndexedFiles) -> None:
        """The files ``files`` reads (those of its index)."""
        self.files = files
        self.index = files.index
        self.paths: list[str] = list(files.index.chunks.paths)
        self._sources = files.sources
        self.refused: dict[str, Skipped] = {}

    def locate(self, path: str) -> Path:
        """Where the file results name ``path`` is on disk."""
        return self._sources.locate(path)

    def read(self, path: str) -> str | None:
        """The text of an indexed file as indexed (``None`` when it is refused: recorded in :attr:`refused`)."""
        try:
            text = self.files.text(path)
        except FileRefused as exc:
            self.refused[path] = Skipped(exc.rel_path, exc.reason)
            return None
        self.refused.pop(path, None)
        return text

    def refused_among(self, paths: list[str]) -> list[Skipped]:
        """The files of ``paths`` that were refused, in order: what a command reports it could not read."""
        return [self.refused[p] for p in paths if p in self.refused]

    def chosen(self, search_filter: SearchFilter) -> list[str]:
        """The paths ``search_filter`` accepts (all of them without a filter)."""
        if not search_filter:
            return self.paths
        return [p for p in self.paths if search_filter.accepts(p, self._sources.relative(p) or p)]

    def path_arg(self, value: Any, *, prefix: str = "") -> str:
        """An indexed file named as results name it, relative to its repository, or by a path on disk
        (relative to the working directory); a :class:`UsageError` naming it otherwise."""
        text = value.strip() if isinstance(value, str) else ""
        if not text:
            raise UsageError(
                f"{prefix}path is empty" if isinstance(value, str) else f"{prefix}path must be text, got {value!r}"
            )
        if text in self.paths:
            return text
        relative = {self._sources.relative(p): p for p in self.paths}
        if text in relative:
            return relative[text]
        on_disk = os.path.abspath(text)  # links not resolved: a link elsewhere never names an indexed file
        for path in self.paths:
            if os.path.abspath(self.locate(path)) == on_disk:
                return path
        raise UsageError(f"{text} is not a file of the index")
