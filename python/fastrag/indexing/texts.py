"""What BM25 indexes for every span: the texts of the chunk index, of the heading-line index and
of the definitions index."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from fastrag.config import HEADING_BODY_SIZE
from fastrag.indexing.chunking import Chunk
from fastrag.indexing.corpus import read_indexed_text
from fastrag.indexing.records import FileRecord
from fastrag.indexing.sources import display_path
from fastrag.indexing.symbols import Symbol, is_parsed, line_offsets

__all__ = ["DEFINITION", "Definitions", "IndexedTexts", "defined_names", "indexed_texts", "with_body"]

#: A definition at the start of a line, in the languages the chunkers parse: a keyword (``def``,
#: ``class``, ``fn``, ``func``, ``function``, ``struct``, ``enum``, ``trait``, ``interface``,
#: ``type``, ``impl``), after modifiers such as ``async`` or ``pub``, then the name it defines.
#: Assignments and annotated fields are not definitions here: counted too, they lost recall
#: (most are local variables, not what a question asks about; docs/retrieval.md, "Definitions").
DEFINITION = re.compile(
    r"^[ \t]*(?:(?:pub(?:\([^)]*\))?|async|static|export|inline|virtual|const|public|private|protected)\s+)*"
    r"(?:def|class|fn|func|function|struct|enum|trait|interface|type|impl)\s+([A-Za-z_]\w*)",
    re.MULTILINE,
)


class IndexedTexts(NamedTuple):
    """The documents of an index's three BM25 indexes (see :func:`indexed_texts`)."""

    chunks: list[str]
    headings: list[str]
    definitions: list[str]


def indexed_texts(
    repo_path: Path, records: Iterable[FileRecord], prefix: str = "", heading_body: int = HEADING_BODY_SIZE
) -> IndexedTexts:
    """The texts BM25 indexes for every chunk and for every heading line: relative path (below
    ``prefix``, if any), context, then the span itself (for a heading line, with the start of its
    section: ``heading_body`` characters at most, :func:`with_body`); and for every chunk, the names
    it defines or lies inside the definition of (:func:`defined_names` of its context and span)."""
    docs: list[str] = []
    heading_docs: list[str] = []
    definitions: list[str] = []
    for record in records:
        text = read_indexed_text(repo_path, record.rel_path, record.digest)
        shown = display_path(prefix, record.rel_path)
        defines = definitions_of(record, text)
        for c in record.chunks:
            docs.append(f"{shown}\n{c.context}\n{text[c.start : c.end]}")
            definitions.append(" ".join(defines.within(c.start, c.end, c.context)))
        sections = with_body(record.headings, heading_body)
        heading_docs.extend(f"{shown}\n{c.context}\n{text[c.start : end]}" for c, end in sections)
    return IndexedTexts(docs, heading_docs, definitions)


def defined_names(text: str) -> list[str]:
    """The names ``text`` defines (:data:`DEFINITION`), sorted, each once. With a chunk's context
    (its enclosing ``class`` / ``def`` / ``impl`` signatures) in ``text``, a chunk inside a class
    counts as part of that class's definition."""
    return sorted({m.group(1) for m in DEFINITION.finditer(text)})


class Definitions:
    """A file's definition lines (:data:`DEFINITION`), found once: the names of those inside a
    span, as :func:`defined_names` finds them in the span's text, without scanning the span again
    (bridges and layers cover most characters two or three times)."""

    def __init__(self, text: str) -> None:
        """Find every definition of ``text``: where its line starts, where its name ends, the name."""
        self._found = [(m.start(), m.end(), m.group(1)) for m in DEFINITION.finditer(text)]

    def within(self, start: int, end: int, context: str = "") -> list[str]:
        """The names defined by the lines that start at or after ``start`` and whose name ends by
        ``end``, and by ``context`` (enclosing signatures), sorted, each once."""
        names = set(defined_names(context)) if context else set()
        found = self._found
        i = bisect.bisect_left(found, start, key=lambda d: d[0])
        while i < len(found) and found[i][1] <= end:
            names.add(found[i][2])
            i += 1
        return sorted(names)


#: Kinds of :mod:`fastrag.indexing.symbols` definition that name what a chunk defines for ranking: a
#: module is every file's, and assignments (constants, variables) are mostly not what a question asks
#: about (counted as definitions, they lost recall: docs/retrieval.md, "Definitions").
_NOT_DEFINING = frozenset({"module", "constant", "variable"})


def definitions_of(record: FileRecord, text: str) -> Definitions | SymbolDefinitions:
    """The definitions of a file's spans: from the parse's symbols where the file has a grammar
    (or is Python), else from its definition lines (:data:`DEFINITION`: text, Markdown's code)."""
    if record.symbols is not None and is_parsed(record.rel_path):
        return SymbolDefinitions(text, record.symbols)
    return Definitions(text)


class SymbolDefinitions:
    """A parsed file's definitions (:func:`~fastrag.indexing.symbols.file_symbols`) by span: those
    whose first line starts inside the span, and those the whole span lies inside (its enclosing
    class, function, ``impl`` or module block), as :meth:`Definitions.within` answers from definition
    lines and the chunk's enclosing signatures."""

    def __init__(self, text: str, symbols: list[Symbol]) -> None:
        """Where each kept definition's first line starts in ``text``, and where its last line ends."""
        starts = line_offsets(text)
        kept = [s for s in symbols if s.kind not in _NOT_DEFINING]

        def line(n: int) -> int:
            return starts[min(max(n, 1), len(starts)) - 1]

        self._found = sorted(
            (line(s.first), line(s.last + 1) if s.last < len(starts) else len(text), s.name) for s in kept
        )
        self._firsts = [first for first, _, _ in self._found]

    def within(self, start: int, end: int, context: str = "") -> list[str]:
        """The names defined on the lines that start in ``[start, end)`` and those of the
        definitions around the whole span, sorted, each once (``context`` is not needed: the parse
        knows the enclosing definitions)."""
        i = bisect.bisect_left(self._firsts, start)
        inside = self._found[i : bisect.bisect_left(self._firsts, end, lo=i)]
        around = (found for found in self._found[:i] if found[1] >= end)
        return sorted({name for _, _, name in (*inside, *around)})


def with_body(headings: list[Chunk], size: int) -> Iterator[tuple[Chunk, int]]:
    """Each heading line (sorted by start) with the end of what is indexed for it: the line and
    then its section's text up to the next heading or anchor line, at most ``size`` characters
    after the line. A question that asks which page or section covers something names what the
    section says, not only its title (benches/RESULTS.md, "Cross-validation")."""
    for n, line in enumerate(headings):
        following = headings[n + 1].start if n + 1 < len(headings) else line.end + size
        yield line, max(line.end, min(following, line.end + size))
