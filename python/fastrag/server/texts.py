"""The text of indexed files, read through the live index as they were indexed: span snippets and line
numbers.

Search results and cited spans are shown with their text and their line range; files are read once
(:class:`~fastrag.indexing.reading.IndexedFiles`: a file swapped for a link, a FIFO or another content
since it was indexed is refused) and kept in an LRU cache bounded by characters (cleared when the live
index changes: offsets belong to it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fastrag.answering.prompt import SpanReader
from fastrag.errors import UserError
from fastrag.indexing.reading import refused_as_none
from fastrag.lines import line_range
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
        return line_range(self.text, start, end)


class SourceTexts:
    """Reads indexed files through ``read`` (:meth:`fastrag.server.live.LiveIndex.read`: as the live
    index indexed them, else a :class:`~fastrag.indexing.reading.FileRefused`)."""

    def __init__(self, read: Callable[[str], str], max_chars: int = MAX_CACHED_CHARS) -> None:
        self._read = read
        self._cache: LruCache[str, FileText] = LruCache(max_chars, lambda found: len(found.text) + 1)

    def text(self, file_path: str) -> FileText:
        """The file named as in the index; a :class:`FileRefused` (naming it relative to its repository)
        when it cannot be read as indexed."""
        found = self._cache.get(file_path)
        if found is None:
            found = FileText(self._read(file_path))
            self._cache.put(file_path, found)
        return found

    def get(self, file_path: str) -> FileText | None:
        """:meth:`text`, or ``None`` when the file is refused."""
        return refused_as_none(self.text, file_path)

    def clear(self) -> None:
        """Forget every file (the index changed: offsets may now refer to newer contents)."""
        self._cache.clear()


def span_text(texts: SourceTexts, name: str, start: int, end: int) -> tuple[str, int, int]:
    """The text of ``name[start:end]`` (a file of the live index) with its first and last line (1-based);
    a :class:`FileRefused` when the file cannot be read as indexed, a :class:`UserError` when ``end`` is
    past its end."""
    found = texts.text(name)
    if end > len(found.text):
        raise UserError(f"end {end} is past the end of {name} ({len(found.text)} characters)")
    first, last = found.lines(start, end)
    return found.text[start:end], first, last


class RootedSpanReader(SpanReader):
    """The prompt's :class:`~fastrag.answering.prompt.SpanReader`, reading files relative to the project root."""

    def __init__(self, texts: SourceTexts) -> None:
        super().__init__()
        self._texts = texts

    def text(self, file_path: str) -> str:
        """The whole decoded file; a :class:`~fastrag.indexing.reading.FileRefused` when it cannot be read."""
        return self._texts.text(file_path).text
