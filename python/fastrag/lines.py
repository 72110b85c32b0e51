"""Character offsets as the lines people read: ``path:first_line-last_line`` (1-based, inclusive).

The index, the datasets' outputs, ``--json`` and the saved answers speak in character offsets (the exercise's
spans); what a terminal, an editor and a person read is lines. :func:`line_range` turns one into the other,
:func:`shown_lines` names a span as ``path:first-last``, and :func:`cite_lines` rewrites the citations of an
answer (``[path:start-end]``, characters) into lines for display.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from fastrag.schemas import CITATION


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
