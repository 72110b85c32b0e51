"""A hit in one line: the line of a span that best matches the query (what ``search`` prints under a hit), and
the hits as ``search`` shows them: ``path:first_line-last_line`` (``--json``: also the character offsets)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from fastrag import _core
from fastrag.errors import UserError
from fastrag.lines import line_range
from fastrag.retrieval.evidence import asked_symbol, symbol_name
from fastrag.retrieval.retriever import clean_query

if TYPE_CHECKING:
    from fastrag.retrieval.retriever import Hit

#: Longest snippet printed, in characters (a longer line is cut and ends with an ellipsis).
SNIPPET_CHARS = 160


def best_line(text: str, start: int, end: int, query: str) -> str:
    """The non-blank line of ``text[start:end]`` with the best BM25 score for ``query`` among the span's lines.

    The query is cleaned as retrieval cleans it (:func:`~fastrag.retrieval.retriever.clean_query`). Ties go
    to the earlier line; without any query term the span's first non-blank line is returned. A query that
    is one identifier shows the first line that spells it whole, when one does (its definition, a call).
    Whitespace is collapsed and the line cut to :data:`SNIPPET_CHARS`; empty for a blank span.
    """
    lines = [" ".join(line.split()) for line in text[start:end].splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return ""
    named = _named_line(lines, query)
    if named is not None:
        line = named
    else:
        ids, _ = _core.Bm25Index.build(lines).search(clean_query(query), 1)
        line = lines[ids[0]] if ids else lines[0]
    return line if len(line) <= SNIPPET_CHARS else line[: SNIPPET_CHARS - 1].rstrip() + "…"


def _named_line(lines: list[str], query: str) -> str | None:
    """For a query that asks about one identifier (:func:`~fastrag.retrieval.evidence.asked_symbol`), the first
    of ``lines`` holding its name as a whole word, else ``None``."""
    symbol = asked_symbol(query)
    if symbol is None:
        return None
    word = re.compile(rf"(?<![\w$]){re.escape(symbol_name(symbol))}(?![\w$])")
    return next((line for line in lines if word.search(line)), None)


@dataclass(frozen=True, slots=True)
class ShownHit:
    """A hit as ``search`` shows it: characters ``[start, end)`` of ``path``, its lines (``None`` when the file
    cannot be read any more), score and best line."""

    path: str
    start: int
    end: int
    first_line: int | None
    last_line: int | None
    score: float
    line: str

    @property
    def location(self) -> str:
        """``path:first_line-last_line``; the character offsets when the file cannot be read."""
        if self.first_line is None:
            return f"{self.path} (characters {self.start}-{self.end}: the file cannot be read)"
        return f"{self.path}:{self.first_line}-{self.last_line}"

    def as_json(self) -> dict[str, Any]:
        """The hit's fields as JSON values."""
        return asdict(self)


def shown_hits(hits: Sequence[Hit], read: Callable[[str], str], query: str) -> list[ShownHit]:
    """``hits`` with their lines and best line, their files' texts from ``read`` (a :class:`UserError` when
    a file cannot be read)."""
    out = []
    for hit in hits:
        try:
            text = read(hit.file_path)
        except UserError:  # the file went away since indexing: the location alone
            out.append(ShownHit(hit.file_path, hit.start, hit.end, None, None, hit.score, ""))
            continue
        first, last = line_range(text, hit.start, hit.end)
        out.append(
            ShownHit(
                hit.file_path, hit.start, hit.end, first, last, hit.score, best_line(text, hit.start, hit.end, query)
            )
        )
    return out
