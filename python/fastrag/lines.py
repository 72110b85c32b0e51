"""Character offsets as the lines people read: ``path:first_line-last_line`` (1-based, inclusive).

The index, the datasets' outputs, ``--json`` and the saved answers speak in character offsets (the exercise's
spans); what a terminal, an editor and a person read is lines. :func:`line_range` turns one into the other,
:func:`shown_lines` names a span as ``path:first-last``, and :func:`cite_lines` rewrites the citations of an
answer (``[path:start-end]``, characters) into lines for display.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from fastrag.schemas import CITATION

if TYPE_CHECKING:
    from fastrag.answering.prompt import SpanReader


def line_range(text: str, start: int, end: int) -> tuple[int, int]:
    """First and last line (1-based) of ``text[start:end]``; an empty span is on the line of ``start``."""
    first = text.count("\n", 0, start) + 1
    return first, first + text.count("\n", start, max(start, end - 1))


def shown_lines(path: str, text: str, start: int, end: int) -> str:
    """``path:first-last`` of the characters ``[start, end)`` of ``text``, the file ``path`` holds."""
    first, last = line_range(text, start, end)
    return f"{path}:{first}-{last}"


def cite_lines(answer: str, text_of: Callable[[str], str | None]) -> str:
    """``answer`` with every ``[path:start-end]`` citation (characters) written ``[path:first-last]`` (lines);
    a citation of a file ``text_of`` cannot read (``None``) is left as it is."""

    def lines(match: re.Match[str]) -> str:
        path, start, end = match.group(1), int(match.group(2)), int(match.group(3))
        text = text_of(path)
        return match.group(0) if text is None else f"[{shown_lines(path, text, start, end)}]"

    return CITATION.sub(lines, answer)


class IndexTexts:
    """The texts of the files the index in ``index_dir`` names (read where it recorded them, from any working
    directory), each read once: ``None`` for a file that cannot be read. Called as ``texts(path)``."""

    def __init__(self, index_dir: Path) -> None:
        self._index_dir = index_dir
        self._reader: SpanReader | None = None

    def __call__(self, path: str) -> str | None:
        """The text of the file results name ``path``; ``None`` when it (or the index) cannot be read."""
        from fastrag.answering.prompt import SpanReader
        from fastrag.errors import UserError
        from fastrag.indexing.generations import current_generation, read_manifest
        from fastrag.indexing.sources import Sources

        try:
            if self._reader is None:
                generation = current_generation(self._index_dir)
                locate = Sources.of(read_manifest(generation)).locate if generation is not None else Path
                self._reader = SpanReader(locate)
            return self._reader.text(path)
        except UserError:
            return None
