"""A second layer of chunks straddling the boundaries of the first.

A chunker must cut somewhere, and evidence that sits across a cut is then split between two
chunks, neither of which scores well. For every pair of neighbouring chunks a *bridge* runs
from the middle of the first to the middle of the second, cut at line starts, so that every
passage lies well inside some chunk. Bridges overlap their neighbours by design; the retriever
drops a hit that mostly overlaps a better one, so the results still name distinct places.
"""

from __future__ import annotations

from itertools import pairwise

from fastrag.indexing.chunking.packer import Chunk


def with_bridges(text: str, chunks: list[Chunk], max_chunk_size: int) -> list[Chunk]:
    """``chunks`` plus one bridge per neighbouring pair, sorted by ``(start, end)``.

    A bridge takes the context of the chunk it ends in and is at most ``max_chunk_size``
    characters long; whitespace-only or degenerate bridges are not made.
    """
    out = list(chunks)
    for a, b in pairwise(chunks):
        lo = _line_start_after(text, (a.start + a.end) // 2, a.end)
        hi = _line_start_after(text, (b.start + b.end) // 2, b.end)
        if a.start < lo < a.end and b.start < hi <= b.end and hi - lo <= max_chunk_size and text[lo:hi].strip():
            out.append(Chunk(lo, hi, b.context))
    out.sort(key=lambda c: (c.start, c.end))
    return out


def _line_start_after(text: str, pos: int, limit: int) -> int:
    """The first line start at or after ``pos`` and before ``limit``, else ``pos`` itself."""
    newline = text.find("\n", pos - 1, limit - 1) if pos > 0 else -1
    return newline + 1 if newline >= 0 else pos
