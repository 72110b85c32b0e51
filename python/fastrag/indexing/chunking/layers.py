"""Extra Markdown chunks indexed beside the primary ones: one per heading section, and table windows.

The layers overlap the primary chunks on purpose: a short section or a run of table rows is a
better retrieval unit for a question about it than the chunk it was packed into.
"""

from __future__ import annotations

import bisect
import re

from fastrag.indexing.chunking.markdown import MarkdownPacker, Section, heading_title, pack_sections
from fastrag.indexing.chunking.packer import NONSPACE, Chunk, resolve_target

_TABLE_RULE = re.compile(r"[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)+\|?[ \t]*(?:\r\n|\r|\n)?$")
_TABLE_LINE = re.compile(r"[ \t]*\|")
#: An anchor line of MkDocs' attribute lists, naming the section that follows: ``[](){ #chat-template }``.
_ANCHOR = re.compile(r"[ \t]*\[\]\(\)\{[ \t]*#[^}\n]*\}[ \t]*$", re.MULTILINE)
_ALNUM = re.compile(r"\w")


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
    return _table_windows(MarkdownPacker(text, max(1, size), rst=False), size, max_chunk_size)


def _table_windows(packer: MarkdownPacker, size: int, max_chunk_size: int) -> list[Chunk]:
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
            header = heading_title(text[head:start].strip().strip("|").replace("|", " | "))
            context = f"{_section_path(packer.root, head)}\n{header}".strip()
            a = 0
            while a < len(bounds) - 1:
                b = a + 1
                while b < len(bounds) - 1 and bounds[b + 1] - bounds[a] <= size:
                    b += 1
                lo, hi = bounds[a], bounds[b]
                while hi > lo and text[hi - 1].isspace():
                    hi -= 1
                if hi - lo <= max_chunk_size and NONSPACE.search(text, lo, hi) is not None:
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
    packer = MarkdownPacker(text, resolve_target(max_chunk_size, target_size), rst)
    extra = list(pack_sections(packer))
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


def _section_path(root: Section, offset: int) -> str:
    """Heading path of the deepest section holding ``offset``."""
    node = root
    while True:
        inner = [c for c in node.children if c.start <= offset < c.end]
        if not inner:
            return node.path
        node = inner[0]


def heading_lines(path: str, text: str) -> list[Chunk]:
    """Every heading line of a Markdown / reST file on its own, and every anchor line, sorted.

    These are the answers to questions that ask *where* something is documented ("which page
    covers profiling", "what anchor marks the Score API section"): one line of 5-60 characters,
    which only a span of comparable size can match under the IoU rule. ``context`` is the heading
    path of the section the line names; an anchor names the section whose heading follows it.
    They are indexed apart from the chunks (see :mod:`fastrag.indexing.builder`). Other files: ``[]``.
    """
    ext = path.rsplit(".", 1)[-1].lower() if "." in path.rsplit("/", 1)[-1] else ""
    if ext not in ("md", "markdown", "rst") or not text:
        return []
    packer = MarkdownPacker(text, max(1, len(text)), ext == "rst")
    sections: list[Section] = []
    stack = list(packer.root.children)
    while stack:
        node = stack.pop()
        sections.append(node)
        stack.extend(node.children)
    sections.sort(key=lambda node: node.start)
    out: list[Chunk] = []
    for node in sections:
        line = _title_line(text, node.start, node.end)
        if line is not None:
            out.append(Chunk(*line, node.path))
    if ext != "rst":
        starts = [node.start for node in sections]
        for match in _ANCHOR.finditer(text):
            lo = match.start() + len(match.group(0)) - len(match.group(0).lstrip())
            hi = match.start() + len(match.group(0).rstrip())
            following = bisect.bisect_left(starts, match.end())
            if following < len(sections) and not text[match.end() : starts[following]].strip():
                context = sections[following].path
            else:
                context = _section_path(packer.root, lo)
            out.append(Chunk(lo, hi, context))
    out.sort(key=lambda c: (c.start, c.end))
    return out


def _title_line(text: str, start: int, end: int) -> tuple[int, int] | None:
    """``[lo, hi)`` of a section's heading line: its first line holding a word (an rst overline
    holds none), without surrounding blanks; ``None`` when the section has no such line."""
    pos = start
    while pos < end:
        stop = text.find("\n", pos, end)
        stop = end if stop < 0 else stop
        if _ALNUM.search(text, pos, stop) is not None:
            line = text[pos:stop]
            lo = pos + len(line) - len(line.lstrip())
            return lo, pos + len(line.rstrip())
        pos = stop + 1
    return None
