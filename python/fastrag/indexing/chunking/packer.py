"""The shared chunk packer and the plain-text chunker.

Every chunker describes a file as a list of contiguous *pieces* (statements, sections,
paragraphs, lines, words, slices) and hands them to :class:`Packer`, which

* packs runs of consecutive pieces into chunks of at most ``target_size`` characters;
* splits any piece larger than ``target_size`` one level down (its own structure first, then
  paragraphs, lines, words and finally fixed slices) and packs the sub-pieces the same way,
  without mixing them with the piece's neighbours;
* drops chunks that hold only whitespace.

Packing is greedy and *balanced*: a run that needs ``k`` chunks is cut into ``k`` chunks whose
largest is as small as possible (the smallest cap for which greedy packing still yields ``k``
chunks). Greedy packing alone leaves a long tail of tiny remainder chunks (a 2100-character
function becomes 2000 + 100); balanced packing makes it 1050 + 1050, which is a far better
retrieval unit and keeps the BM25 length normalisation meaningful.

Because the last level (fixed slices) always fits, every chunk holds at most ``target_size``
characters, which never exceeds ``max_chunk_size``. Boundaries fall on line starts unless a
single line is longer than ``target_size``; then it is cut between words (or, for one huge
"word", into equal slices).

The Markdown chunker (:mod:`fastrag.indexing.chunking.markdown`), the Python one and the tree-sitter
one (:mod:`fastrag.indexing.chunking.syntax`) build on it.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from itertools import pairwise

import fastrag._core

__all__ = ["SIGNATURE_LIMIT", "Chunk", "Packer", "Piece", "chunk_plain", "resolve_target"]


@dataclass(frozen=True, slots=True)
class Chunk:
    """A span ``text[start:end]`` of a file plus text indexed with it.

    ``context`` is not part of the span: for nested code it holds the enclosing ``class`` /
    ``def`` signatures, for Markdown the heading path.
    """

    start: int
    end: int
    context: str = ""


#: ``(start, end, context of the first chunk, context of later chunks, payload)``.
#: The payload is an ``int`` text level (see :data:`PARAGRAPHS` …) for raw text or a
#: structural node that a :class:`Packer` subclass knows how to split.
Piece = tuple[int, int, str, str, object]

#: Characters of an enclosing signature kept in a chunk's ``context`` (code chunkers).
SIGNATURE_LIMIT = 300

PARAGRAPHS = 0
LINES = 1
WORDS = 2
SLICES = 3
ATOMIC = 4

NONSPACE = re.compile(r"\S")
_WORD = re.compile(r"\S+")
_SURROGATE = re.compile("[\ud800-\udfff]")


def resolve_target(max_chunk_size: int, target_size: int | None) -> int:
    """Return the effective target size, validating both sizes."""
    if max_chunk_size < 1:
        raise ValueError(f"max_chunk_size must be positive, got {max_chunk_size}")
    if target_size is None:
        return max_chunk_size
    if not 1 <= target_size <= max_chunk_size:
        raise ValueError(f"target_size must lie in 1..max_chunk_size={max_chunk_size}, got {target_size}")
    return target_size


class Packer:
    """Packs contiguous pieces of one text into chunks of at most ``target`` characters."""

    def __init__(self, text: str, target: int, line_starts: list[int] | None = None) -> None:
        """Prepare packing ``text``; ``line_starts`` may be passed if already computed."""
        self.text = text
        self.n = len(text)
        self.target = target
        self.chunks: list[Chunk] = []
        self._line_starts = line_starts

    @property
    def line_starts(self) -> list[int]:
        """Code-point offset of every line start (computed by the native core, cached)."""
        if self._line_starts is None:
            try:
                self._line_starts = fastrag._core.line_starts(self.text)
            except UnicodeEncodeError:  # lone surrogates (surrogateescape-decoded files)
                self._line_starts = fastrag._core.line_starts(_SURROGATE.sub("\ufffd", self.text))
        return self._line_starts

    # -- packing --------------------------------------------------------------------------

    def pack(self, pieces: list[Piece]) -> None:
        """Append the chunks of contiguous ``pieces`` (in order) to :attr:`chunks`.

        Runs of pieces that fit the target are packed together. A piece larger than the
        target is split and its sub-pieces are packed on their own, except that a *small* run
        (under a quarter of the target) just before it, or closing the list just after it, is
        packed together with its sub-pieces: a class header stays with the start of its
        oversized first method, and ``return x`` with the end of the oversized loop above it,
        instead of becoming tiny chunks.
        """
        target = self.target
        small = target // 4
        run: list[Piece] = []
        count = len(pieces)
        i = 0
        while i < count:
            piece = pieces[i]
            i += 1
            if piece[1] - piece[0] <= target:
                run.append(piece)
                continue
            sub = self.split(piece)
            if not sub:  # whitespace only: nothing to chunk, and nothing to carry across
                self._flush(run)
                run = []
                continue
            if run and run[-1][1] - run[0][0] < small:
                sub = run + sub
            else:
                self._flush(run)
            run = []
            if i < count and pieces[-1][1] - pieces[i][0] < small:
                sub.extend(pieces[i:])  # a small tail (it cannot hold an oversized piece)
                i = count
            self.pack(sub)
        self._flush(run)

    def _flush(self, run: list[Piece]) -> None:
        """Emit a run of contiguous pieces, each at most ``target``, as balanced chunks."""
        if not run:
            return
        bounds = [run[0][0]]
        bounds.extend([piece[1] for piece in run])
        count = len(run)
        total = bounds[-1] - bounds[0]
        if total <= self.target:
            cuts = [0, count]
        else:
            cuts = _balanced(bounds, self.target)
            cuts = _absorb_tiny(bounds, cuts, self.target)
            if len(cuts) > 2 and self._refine_tiny_end(run, bounds, cuts):
                return
        text, emit = self.text, self.chunks.append
        for i, j in pairwise(cuts):
            start, end = bounds[i], bounds[j]
            if NONSPACE.search(text, start, end) is not None:
                emit(Chunk(start, end, run[i][2]))

    def _refine_tiny_end(self, run: list[Piece], bounds: list[int], cuts: list[int]) -> bool:
        """Re-pack ``run`` if its first or last chunk is tiny next to a one-piece chunk.

        The one piece (say the method that follows a lone ``class`` line, or the loop before
        a lone ``return``) is split one level down so that the tiny remainder can join part
        of it. Returns whether the run was packed here.
        """
        small = self.target // 4
        if bounds[cuts[1]] - bounds[0] < small and cuts[2] - cuts[1] == 1:
            index = cuts[1]
        elif bounds[-1] - bounds[cuts[-2]] < small and cuts[-2] - cuts[-3] == 1:
            index = cuts[-3]
        else:
            return False
        piece = run[index]
        ls = self.line_starts
        line = bisect_right(ls, piece[0])
        if line >= len(ls) or ls[line] >= piece[1]:
            return False  # a single line: do not cut it between words
        if isinstance(piece[4], int) and piece[4] > LINES:
            return False
        sub = self.split(piece)
        if len(sub) < 2:
            return False
        self.pack(run[:index] + sub + run[index + 1 :])
        return True

    # -- splitting ------------------------------------------------------------------------

    def split(self, piece: Piece) -> list[Piece]:
        """Split an oversized piece into smaller contiguous pieces covering the same span."""
        if isinstance(piece[4], int):
            return self.split_text(piece)
        return self.split_node(piece)

    def split_node(self, piece: Piece) -> list[Piece]:
        """Split a structural piece; subclasses override this for their node types."""
        return self.split_text((piece[0], piece[1], piece[2], piece[3], PARAGRAPHS))

    def split_text(self, piece: Piece) -> list[Piece]:
        """Split raw text at the piece's level, descending until it yields several pieces."""
        start, end, first_ctx, rest_ctx, payload = piece
        level = payload if isinstance(payload, int) else PARAGRAPHS
        while True:
            if level == PARAGRAPHS:
                bounds = self.paragraph_bounds(start, end)
            elif level == LINES:
                ls = self.line_starts
                bounds = [start, *ls[bisect_right(ls, start) : bisect_left(ls, end)], end]
            elif level == WORDS:
                starts = [m.start() for m in _WORD.finditer(self.text, start, end)]
                if not starts:
                    return []  # whitespace only: nothing to cover
                bounds = [start, *starts[1:], end]
            else:
                size = end - start
                parts = -(-size // self.target)
                if parts < 2:
                    return [(start, end, first_ctx, rest_ctx, ATOMIC)]
                bounds = [start + i * size // parts for i in range(parts)] + [end]
                level = ATOMIC - 1
            if len(bounds) > 2:
                break
            level += 1
        level += 1
        out: list[Piece] = [(a, b, rest_ctx, rest_ctx, level) for a, b in pairwise(bounds)]
        out[0] = (bounds[0], bounds[1], first_ctx, rest_ctx, level)
        return out

    def paragraph_bounds(self, start: int, end: int) -> list[int]:
        """Boundaries of blank-line separated paragraphs in ``[start, end)``.

        A paragraph starts at a non-blank line that follows a blank line; the blank lines go
        with the paragraph before them.
        """
        ls, text, nonspace = self.line_starts, self.text, NONSPACE.search
        first = bisect_right(ls, start)
        last = bisect_left(ls, end)
        bounds = [start]
        prev_blank = False
        line_end = ls[first] if first < last else end
        if nonspace(text, start, line_end) is None:
            prev_blank = True
        for i in range(first, last):
            line_start = ls[i]
            line_end = ls[i + 1] if i + 1 < last else end
            blank = nonspace(text, line_start, line_end) is None
            if prev_blank and not blank:
                bounds.append(line_start)
            prev_blank = blank
        bounds.append(end)
        return bounds


def _balanced(bounds: list[int], target: int) -> list[int]:
    """Indices into ``bounds`` cutting it into as few chunks of at most ``target`` as greedy
    packing needs, with the largest chunk as small as possible."""
    cuts = _greedy(bounds, target)
    parts = len(cuts) - 1
    first, last = bounds[0], bounds[-1]
    if parts == 2:
        j = bisect_left(bounds, first + (last - first) // 2, 1, len(bounds) - 1)
        if j > 1 and max(bounds[j - 1] - first, last - bounds[j - 1]) <= max(bounds[j] - first, last - bounds[j]):
            j -= 1
        return [0, j, len(bounds) - 1]
    low = -(-(last - first) // parts)
    high = max(bounds[j] - bounds[i] for i, j in pairwise(cuts))
    best = cuts
    while low < high:
        mid = (low + high) // 2
        trial = _greedy(bounds, mid)
        if trial and len(trial) - 1 <= parts:
            high, best = mid, trial
        else:
            low = mid + 1
    return best


def _absorb_tiny(bounds: list[int], cuts: list[int], target: int) -> list[int]:
    """Merge chunks under a quarter of ``target`` into a neighbour where the sum fits.

    Failing that, a tiny first (last) chunk takes the first (last) piece of the chunk next to
    it when that fits. Balanced packing can leave such chunks at the ends of a run.
    """
    small = target // 4
    out = [cuts[0]]
    for k in range(1, len(cuts)):
        i, j = out[-1], cuts[k]
        if bounds[j] - bounds[i] < small:
            if len(out) > 1 and bounds[j] - bounds[out[-2]] <= target:
                out[-1] = j  # join the previous chunk
                continue
            if k + 1 < len(cuts) and bounds[cuts[k + 1]] - bounds[i] <= target:
                continue  # join the next chunk
        out.append(j)
    if len(out) > 2:
        first, second = out[1], out[2]
        if (
            bounds[first] - bounds[0] < small
            and second - first > 1
            and bounds[first + 1] - bounds[0] <= target
            and bounds[second] - bounds[first + 1] >= small
        ):
            out[1] += 1
        last, before = out[-2], out[-3]
        if (
            bounds[-1] - bounds[last] < small
            and last - before > 1
            and bounds[-1] - bounds[last - 1] <= target
            and bounds[last - 1] - bounds[before] >= small
        ):
            out[-2] -= 1
    return out


def _greedy(bounds: list[int], cap: int) -> list[int]:
    """Indices into ``bounds`` cutting it greedily into chunks of at most ``cap`` characters.

    Returns ``[]`` if a single piece is larger than ``cap``.
    """
    last = len(bounds) - 1
    cuts = [0]
    i = 0
    while i < last:
        j = bisect_right(bounds, bounds[i] + cap, i + 1) - 1
        if j <= i:
            return []
        cuts.append(j)
        i = j
    return cuts


# -- plain text ------------------------------------------------------------------------------


def chunk_plain(text: str, max_chunk_size: int, target_size: int | None = None) -> list[Chunk]:
    """Chunk plain text: paragraphs, then lines, words and fixed slices, packed to target."""
    packer = Packer(text, resolve_target(max_chunk_size, target_size))
    if text:
        packer.pack([(0, len(text), "", "", PARAGRAPHS)])
    return packer.chunks
