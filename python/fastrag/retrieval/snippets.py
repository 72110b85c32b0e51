"""A hit in one line: the line of a span that best matches the query (what ``search`` prints under a hit)."""

from __future__ import annotations

from fastrag import _core
from fastrag.retrieval.retriever import clean_query

#: Longest snippet printed, in characters (a longer line is cut and ends with an ellipsis).
SNIPPET_CHARS = 160


def best_line(text: str, start: int, end: int, query: str) -> str:
    """The non-blank line of ``text[start:end]`` with the best BM25 score for ``query`` among the span's lines.

    The query is cleaned as retrieval cleans it (:func:`~fastrag.retrieval.retriever.clean_query`). Ties go
    to the earlier line; without any query term the span's first non-blank line is returned.
    Whitespace is collapsed and the line cut to :data:`SNIPPET_CHARS`; empty for a blank span.
    """
    lines = [" ".join(line.split()) for line in text[start:end].splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return ""
    ids, _ = _core.Bm25Index.build(lines).search(clean_query(query), 1)
    line = lines[ids[0]] if ids else lines[0]
    return line if len(line) <= SNIPPET_CHARS else line[: SNIPPET_CHARS - 1].rstrip() + "…"
