"""The text of indexed files, found through the live index (else relative to the project root): span snippets
and line numbers.

Search results and cited spans are shown with their text and their line range; files are read once and
kept in an LRU cache bounded by characters (cleared when the live index changes: offsets belong to it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fastrag.answering.prompt import SpanReader
from fastrag.errors import UserError
from fastrag.indexing.corpus import read_text
from fastrag.server.cache import LruCache

#: Characters of file text kept decoded in memory (the whole vLLM corpus is 24 M).
MAX_CACHED_CHARS = 64_000_000


@dataclass(frozen=True, slots=True)
class FileText:
    """A decoded file."""

    text: str

    def line_of(self, offset: int) -> int:
        """The 1-based line holding character ``offset``."""
        return self.text.count("\n", 0, offset) + 1

    def lines(self, start: int, end: int) -> tuple[int, int]:
        """First and last line (1-based) of ``text[start:end]``; an empty span is on the line of ``start``."""
        first = self.line_of(start)
        return first, first + self.text.count("\n", start, max(start, end - 1))


class SourceTexts:
    """Reads indexed files (:func:`~fastrag.indexing.corpus.read_text`, as the prompt does).

    ``locate`` says where the file a result names is (see :meth:`fastrag.indexing.sources.Sources.locate`);
    a relative answer, or a path when there is no ``locate``, is read under ``root``.
    """

    def __init__(
        self, root: Path, max_chars: int = MAX_CACHED_CHARS, locate: Callable[[str], Path] | None = None
    ) -> None:
        self.root = root
        self._locate = locate
        self._cache: LruCache[str, FileText] = LruCache(max_chars, lambda found: len(found.text) + 1)

    def get(self, file_path: str) -> FileText | None:
        """The file named as in the index (relative to the root, or absolute); ``None`` when unreadable."""
        found = self._cache.get(file_path)
        if found is None:
            try:
                found = FileText(read_text(self.root / (self._locate(file_path) if self._locate else file_path)))
            except OSError:
                return None
            self._cache.put(file_path, found)
        return found

    def clear(self) -> None:
        """Forget every file (the index changed: offsets may now refer to newer contents)."""
        self._cache.clear()


class RootedSpanReader(SpanReader):
    """The prompt's :class:`~fastrag.answering.prompt.SpanReader`, reading files relative to the project root."""

    def __init__(self, texts: SourceTexts) -> None:
        super().__init__()
        self._texts = texts

    def text(self, file_path: str) -> str:
        """The whole decoded file; a :class:`UserError` when it cannot be read."""
        found = self._texts.get(file_path)
        if found is None:
            raise UserError(f"cannot read source {file_path}")
        return found.text
