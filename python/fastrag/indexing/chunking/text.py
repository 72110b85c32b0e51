"""Shared chunk packer, plain-text chunker and Markdown/reStructuredText chunker.

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

Markdown decisions, taken after looking at the vLLM docs (1403 heading sections, median 373
characters, a third of them under 200 characters: many sections are a heading and one line
or a ``--8<--`` include):

* Sections form a tree (ATX ``#`` headings, setext ``===``/``---`` underlines, in ``.rst`` any
  punctuation underline with an optional overline, levels in order of appearance). ``#`` lines
  inside fenced code blocks (```` ``` ```` or ``~~~``, any indentation) and in a leading YAML
  front matter block are not headings.
* A section that fits the target is one piece: small sub-sections stay with their parent, and
  consecutive small sibling sections are packed together up to the target. A chunk that holds
  only a heading line is therefore rare (it only happens when the next sibling is too large
  to join it).
* A section larger than the target is split into its introduction (heading line plus the text
  before the first sub-section) and its sub-sections, recursively; an introduction larger than
  the target is split by paragraphs (blank lines; a fenced code block is one paragraph), then
  lines, words and slices.
* ``context`` holds the heading path (``Installation > GPU > CUDA``) of the headings that
  enclose the chunk but are not inside it: a chunk that starts with its own heading gets the
  path of its ancestors, a continuation chunk the full path.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from itertools import pairwise

import fastrag._core

__all__ = [
    "Chunk",
    "Packer",
    "Piece",
    "chunk_markdown",
    "chunk_plain",
    "markdown_layers",
    "markdown_sections",
    "resolve_target",
    "table_windows",
]


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

PARAGRAPHS = 0
LINES = 1
WORDS = 2
SLICES = 3
ATOMIC = 4

_NONSPACE = re.compile(r"\S")
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
            if _NONSPACE.search(text, start, end) is not None:
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
        ls, text, nonspace = self.line_starts, self.text, _NONSPACE.search
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


# -- Markdown / reStructuredText -------------------------------------------------------------

_ATX = re.compile(r" {0,3}(#{1,6})(?=[ \t\r\n]|$)")
_ATX_CLOSE = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*(?:\r\n|\r|\n)?$")
_RST_RULE = re.compile(r"([!-/:-@\[-`{-~])\1+[ \t]*(?:\r\n|\r|\n)?$")
_FRONT_MATTER = re.compile(r"---[ \t]*(?:\r\n|\r|\n)?$")
_SPACES = re.compile(r"\s+")

_TITLE_LIMIT = 200


class _Section:
    """A heading section: heading line through the end of its last sub-section."""

    __slots__ = ("children", "end", "level", "path", "start")

    def __init__(self, start: int, level: int, path: str) -> None:
        self.start = start
        self.end = start
        self.level = level
        self.path = path
        self.children: list[_Section] = []


def _title(raw: str) -> str:
    """Normalise heading text for the heading path."""
    return _SPACES.sub(" ", raw).strip()[:_TITLE_LIMIT]


class _MarkdownPacker(Packer):
    """Packer that splits heading sections and fence-aware paragraphs."""

    def __init__(self, text: str, target: int, rst: bool) -> None:
        """Scan ``text`` once for headings, fences and paragraph starts."""
        super().__init__(text, target)
        self.root = _Section(0, 0, "")
        self.root.end = self.n
        self._paragraphs: list[int] = []
        self._scan(rst)

    def _scan(self, rst: bool) -> None:
        """Find headings (building the section tree) and paragraph starts, line by line."""
        text, n, ls = self.text, self.n, self.line_starts
        nonspace = _NONSPACE.search
        count = len(ls)
        headings: list[tuple[int, int, str]] = []  # (start offset, level, title)
        paragraphs = self._paragraphs
        rst_levels: dict[tuple[str, bool], int] = {}
        fence_char, fence_len = "", 0
        prev_blank = True
        prev_text = -1  # index of the previous line if it is plain paragraph text
        last_rule = -1  # index of the last rst underline
        i = 0
        if not rst and count > 1 and _FRONT_MATTER.match(text, 0, ls[1]):
            for j in range(1, count):
                line_end = ls[j + 1] if j + 1 < count else n
                if _FRONT_MATTER.match(text, ls[j], line_end):
                    i = j + 1
                    paragraphs.append(0)
                    prev_blank = True
                    break
        while i < count:
            start = ls[i]
            end = ls[i + 1] if i + 1 < count else n
            i += 1
            if start >= n:
                break
            if fence_char:
                close = _FENCE.match(text, start, end)
                if (
                    close is not None
                    and close.group(1)[0] == fence_char
                    and len(close.group(1)) >= fence_len
                    and nonspace(text, close.end(), end) is None
                ):
                    fence_char = ""
                    prev_blank = True  # the next line starts a new paragraph
                continue
            if nonspace(text, start, end) is None:
                prev_blank = True
                prev_text = -1
                continue
            if not rst:
                fence = _FENCE.match(text, start, end)
                if fence is not None:
                    marker = fence.group(1)
                    if marker[0] != "`" or "`" not in text[fence.end() : end]:
                        fence_char, fence_len = marker[0], len(marker)
                        paragraphs.append(start)
                        prev_blank = False
                        prev_text = -1
                        continue
                atx = _ATX.match(text, start, end)
                if atx is not None:
                    raw = text[atx.end() : end].strip()
                    raw = _ATX_CLOSE.sub("", raw)
                    headings.append((start, len(atx.group(1)), _title(raw)))
                    paragraphs.append(start)
                    prev_blank = True  # a heading ends its paragraph
                    prev_text = -1
                    continue
                if prev_text >= 0:
                    setext = _SETEXT.match(text, start, end)
                    if setext is not None and len(setext.group(1)) >= 2:
                        title_start = ls[prev_text]
                        level = 1 if setext.group(1)[0] == "=" else 2
                        headings.append((title_start, level, _title(text[title_start:start])))
                        if not paragraphs or paragraphs[-1] != title_start:
                            paragraphs.append(title_start)
                        prev_blank = True
                        prev_text = -1
                        continue
            elif prev_text >= 0:
                rule = _RST_RULE.match(text, start, end)
                if rule is not None:
                    title_start = ls[prev_text]
                    title = _title(text[title_start:start])
                    if len(rule.group(0).strip()) >= min(len(title), 3):
                        char = rule.group(1)
                        over = prev_text - 1 > last_rule and _is_rule(text, ls, prev_text - 1, char, n)
                        if over:
                            title_start = ls[prev_text - 1]
                        level = rst_levels.setdefault((char, over), len(rst_levels) + 1)
                        headings.append((title_start, level, title))
                        last_rule = i - 1
                        if paragraphs and paragraphs[-1] >= title_start:
                            paragraphs.pop()
                        paragraphs.append(title_start)
                        prev_blank = True
                        prev_text = -1
                        continue
            if prev_blank:
                paragraphs.append(start)
            prev_blank = False
            prev_text = i - 1
        self._build_tree(headings)

    def _build_tree(self, headings: list[tuple[int, int, str]]) -> None:
        """Nest headings into sections by level."""
        stack = [self.root]
        previous = -1
        for start, level, title in headings:
            if start <= previous:
                continue  # defensive: heading starts are strictly increasing
            previous = start
            while len(stack) > 1 and stack[-1].level >= level:
                stack.pop().end = start
            parent = stack[-1]
            path = f"{parent.path} > {title}" if parent.path else title
            node = _Section(start, level, path)
            parent.children.append(node)
            stack.append(node)
        while len(stack) > 1:
            stack.pop().end = self.n

    def paragraph_bounds(self, start: int, end: int) -> list[int]:
        """Paragraph starts found by the scan (fenced code blocks stay whole)."""
        paragraphs = self._paragraphs
        inner = paragraphs[bisect_right(paragraphs, start) : bisect_left(paragraphs, end)]
        return [start, *inner, end]

    def section_pieces(self, node: _Section, ancestors: str) -> list[Piece]:
        """Pieces of a section: its introduction, then one piece per sub-section."""
        if not node.children:
            return [(node.start, node.end, ancestors, node.path, PARAGRAPHS)]
        pieces: list[Piece] = []
        intro_end = node.children[0].start
        if intro_end > node.start:
            pieces.append((node.start, intro_end, ancestors, node.path, PARAGRAPHS))
        for child in node.children:
            pieces.append((child.start, child.end, node.path, node.path, child))
        return pieces

    def segments(self) -> list[Piece]:
        """One piece per section (the text before the first heading included): its heading
        line through the start of its first sub-section, in document order."""
        out: list[Piece] = []
        stack: list[tuple[_Section, str]] = [(self.root, "")]
        while stack:
            node, ancestors = stack.pop()
            own_end = node.children[0].start if node.children else node.end
            if own_end > node.start:
                out.append((node.start, own_end, ancestors, node.path, PARAGRAPHS))
            stack.extend((child, node.path) for child in reversed(node.children))
        return out

    def split_node(self, piece: Piece) -> list[Piece]:
        """Split an oversized section into introduction and sub-sections."""
        node = piece[4]
        assert isinstance(node, _Section)
        return self.section_pieces(node, piece[2])


def _is_rule(text: str, ls: list[int], index: int, char: str, n: int) -> bool:
    """Whether line ``index`` is an rst overline made of ``char``."""
    end = ls[index + 1] if index + 1 < len(ls) else n
    rule = _RST_RULE.match(text, ls[index], end)
    return rule is not None and rule.group(1) == char


def chunk_markdown(text: str, max_chunk_size: int, target_size: int | None = None, *, rst: bool = False) -> list[Chunk]:
    """Chunk Markdown (or, with ``rst=True``, reStructuredText) along its heading tree."""
    target = resolve_target(max_chunk_size, target_size)
    if not text:
        return []
    packer = _MarkdownPacker(text, target, rst)
    packer.pack(packer.section_pieces(packer.root, ""))
    return packer.chunks


def markdown_sections(
    text: str, max_chunk_size: int, target_size: int | None = None, *, rst: bool = False
) -> list[Chunk]:
    """Every heading section's own text (heading line up to its first sub-heading) as chunks.

    Unlike :func:`chunk_markdown`, small sibling sections are not packed together; a section
    larger than the target is split by paragraphs, lines, words and slices as usual. Contexts
    are the same heading paths.
    """
    target = resolve_target(max_chunk_size, target_size)
    if not text:
        return []
    return _sections(_MarkdownPacker(text, target, rst))


def _sections(packer: _MarkdownPacker) -> list[Chunk]:
    """:func:`markdown_sections` on an already scanned text (the packer's chunks must be empty)."""
    for segment in packer.segments():
        packer.pack([segment])
    return packer.chunks


# -- Markdown tables ---------------------------------------------------------------------------

_TABLE_RULE = re.compile(r"[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)+\|?[ \t]*(?:\r\n|\r|\n)?$")
_TABLE_LINE = re.compile(r"[ \t]*\|")


def table_windows(text: str, size: int, max_chunk_size: int) -> list[Chunk]:
    """Row windows of the Markdown tables of ``text``: runs of consecutive rows of at most ``size``
    characters (a longer row is a window by itself, dropped beyond ``max_chunk_size``), the first
    window of a table starting at its header. ``context`` is the heading path and the table's
    header row, so that every window carries the column names (``Architecture | Models | LoRA``)
    next to its rows.

    A table is a line starting with ``|`` followed by a delimiter row (``|---|:--:|``) and the
    ``|`` lines after it. A table's rows are mostly short, and in a 2,000-character chunk a
    question naming one row's model meets it once among hundreds of other names; a window keeps
    the row, its neighbours and the header that says what the columns mean.
    """
    if "|" not in text:
        return []
    return _table_windows(_MarkdownPacker(text, max(1, size), rst=False), size, max_chunk_size)


def _table_windows(packer: _MarkdownPacker, size: int, max_chunk_size: int) -> list[Chunk]:
    """:func:`table_windows` on an already scanned Markdown text."""
    text, ls, n = packer.text, packer.line_starts, packer.n
    count = len(ls)
    out: list[Chunk] = []
    i = 1
    while i < count:
        start, end = ls[i], ls[i + 1] if i + 1 < count else n
        head = ls[i - 1]
        if not (_TABLE_RULE.match(text, start, end) and _TABLE_LINE.match(text, head, start)):
            i += 1
            continue
        rows = [head]
        j = i + 1
        while j < count and _TABLE_LINE.match(text, ls[j], ls[j + 1] if j + 1 < count else n):
            rows.append(ls[j])
            j += 1
        table_end = ls[j] if j < count else n
        if len(rows) > 1:
            bounds = [rows[0], *rows[2:], table_end] if len(rows) > 2 else [rows[0], table_end]
            header = _title(text[head:start].strip().strip("|").replace("|", " | "))
            context = f"{_section_path(packer.root, head)}\n{header}".strip()
            a = 0
            while a < len(bounds) - 1:
                b = a + 1
                while b < len(bounds) - 1 and bounds[b + 1] - bounds[a] <= size:
                    b += 1
                lo, hi = bounds[a], bounds[b]
                while hi > lo and text[hi - 1].isspace():
                    hi -= 1
                if hi - lo <= max_chunk_size and _NONSPACE.search(text, lo, hi) is not None:
                    out.append(Chunk(lo, hi, context))
                a = b
        i = j
    return out


def markdown_layers(
    path: str, text: str, max_chunk_size: int, target_size: int | None, table_size: int, primary: list[Chunk]
) -> list[Chunk]:
    """Extra chunks of a Markdown / reST file, indexed beside its ``primary`` chunks (and bridges).

    * **sections** (:func:`markdown_sections`): each heading section on its own, where the
      chunker packed small sibling sections together. A question about one short section (a
      heading and a line or two) then meets a span of that section's size;
    * **table windows** (:func:`table_windows`, Markdown only): runs of table rows of at most
      ``table_size`` characters with the header row as context.

    Spans already in ``primary`` and repeats are left out; the result is sorted by
    ``(start, end)``. Other files get no extra chunks.
    """
    ext = path.rsplit(".", 1)[-1].lower() if "." in path.rsplit("/", 1)[-1] else ""
    if ext not in ("md", "markdown", "rst"):
        return []
    if not text:
        return []
    rst = ext == "rst"
    packer = _MarkdownPacker(text, resolve_target(max_chunk_size, target_size), rst)
    extra = list(_sections(packer))
    if not rst and table_size > 0 and "|" in text:
        extra += _table_windows(packer, min(table_size, max_chunk_size), max_chunk_size)
    seen = {(c.start, c.end) for c in primary}
    out: list[Chunk] = []
    for chunk in extra:
        if (chunk.start, chunk.end) not in seen:
            seen.add((chunk.start, chunk.end))
            out.append(chunk)
    out.sort(key=lambda c: (c.start, c.end))
    return out


def _section_path(root: _Section, offset: int) -> str:
    """Heading path of the deepest section holding ``offset``."""
    node = root
    while True:
        inner = [c for c in node.children if c.start <= offset < c.end]
        if not inner:
            return node.path
        node = inner[0]
