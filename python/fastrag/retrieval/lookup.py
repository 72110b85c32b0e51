"""What the agent-facing commands and tools share: an index's files as results name them, read once,
and a path argument checked against them (``definitions``, ``references``, ``outline``, ``grep``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fastrag.errors import UsageError
from fastrag.indexing.corpus import read_text
from fastrag.indexing.generations import LoadedIndex
from fastrag.indexing.sources import Sources
from fastrag.retrieval.filters import SearchFilter

__all__ = ["IndexFiles"]


class IndexFiles:
    """The files of a loaded index: their names as results give them, where they are, their texts (cached)."""

    def __init__(self, index: LoadedIndex) -> None:
        """Files of ``index``."""
        self.index = index
        self.paths: list[str] = list(index.chunks.paths)
        self._sources = Sources.of(index.manifest)
        self._texts: dict[str, str | None] = {}

    def locate(self, path: str) -> Path:
        """Where the file results name ``path`` is on disk."""
        return self._sources.locate(path)

    def read(self, path: str) -> str | None:
        """The text of an indexed file (``None`` when it can no longer be read)."""
        if path not in self._texts:
            try:
                self._texts[path] = read_text(self.locate(path))
            except OSError:
                self._texts[path] = None
        return self._texts[path]

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
        on_disk = os.path.realpath(text)
        for path in self.paths:
            if os.path.realpath(self.locate(path)) == on_disk:
                return path
        raise UsageError(f"{text} is not a file of the index")
