"""Every occurrence of an identifier in the indexed files, as code or in comments and strings.

An occurrence is the name as a whole word (not inside a longer identifier). Its place is told by the
file's parser where fastrag has one: Python's tokenizer (comments, strings; the expressions of an
f-string are code), or the file's tree-sitter grammar (the nodes whose type says ``comment`` or
``string``; an interpolation inside a string is code). Files without a parser (Markdown, YAML, ...)
are ``text``. Results are grouped by file, each with its line number and the line's text.
"""

from __future__ import annotations

import io
import os
import re
import tokenize
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fastrag.indexing.chunking.grammars import parse
from fastrag.indexing.languages import GRAMMAR_OF_SUFFIX
from fastrag.indexing.symbols import line_offsets

__all__ = ["PLACES", "FileReferences", "Reference", "classify", "find_references", "word_pattern"]

#: Where an occurrence is: code, a comment, a string, or a file fastrag does not parse.
PLACES = ("code", "comment", "string", "text")
#: Longest line text returned.
LINE_CHARS = 240
_INTERPOLATION = ("interpolation", "substitution", "template_substitution", "escape")


@dataclass(frozen=True, slots=True)
class Reference:
    """One occurrence: 1-based line and column (characters), its place (:data:`PLACES`), the line's text."""

    line: int
    column: int
    place: str
    text: str


@dataclass(slots=True)
class FileReferences:
    """The occurrences in one file."""

    path: str
    references: list[Reference] = field(default_factory=list)


def word_pattern(name: str) -> re.Pattern[str]:
    """The whole-word occurrences of ``name`` (not preceded or followed by an identifier character)."""
    return re.compile(rf"(?<![\w$]){re.escape(name)}(?![\w$])")


def _python_regions(text: str) -> list[tuple[int, int, str]]:
    """Character ranges of the comments and strings of Python source (the tokenizer's view)."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(row: int, col: int) -> int:
        return starts[row - 1] + col if row - 1 < len(starts) else len(text)

    regions: list[tuple[int, int, str]] = []
    strings = {tokenize.STRING}
    fstring_middle = getattr(tokenize, "FSTRING_MIDDLE", None)
    if fstring_middle is not None:
        strings.add(fstring_middle)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                regions.append((offset(*tok.start), offset(*tok.end), "comment"))
            elif tok.type in strings:
                regions.append((offset(*tok.start), offset(*tok.end), "string"))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass  # the regions up to the error stand
    return regions


def _syntax_places(grammar: str, text: str, offsets: list[int], length: int) -> list[str]:
    """The place of each occurrence at ``offsets`` (characters) along ``grammar``'s syntax tree."""
    data, tree = parse(grammar, text)
    places = []
    ascii_text = len(data) == len(text)
    for start in offsets:
        lo = start if ascii_text else len(text[:start].encode("utf-8", "surrogatepass"))
        hi = lo + (length if ascii_text else len(text[start : start + length].encode("utf-8", "surrogatepass")))
        node = tree.root_node.descendant_for_byte_range(lo, hi)
        place = "code"
        while node is not None:
            kind = node.type
            if any(word in kind for word in _INTERPOLATION):
                break
            if "comment" in kind:
                place = "comment"
                break
            if "string" in kind or kind in ("heredoc_body", "raw_string_literal", "char_literal"):
                place = "string"
                break
            node = node.parent
        places.append(place)
    return places


def classify(path: str, text: str, offsets: list[int], length: int) -> list[str]:
    """The place (:data:`PLACES`) of the occurrences at ``offsets`` of a ``length``-character name in the
    file ``path`` holding ``text``."""
    ext = os.path.splitext(path)[1].lower()
    if ext in (".py", ".pyi"):
        regions = _python_regions(text)
        begins = [r[0] for r in regions]
        out = []
        for start in offsets:
            i = bisect_right(begins, start) - 1
            out.append(regions[i][2] if i >= 0 and start < regions[i][1] else "code")
        return out
    grammar = GRAMMAR_OF_SUFFIX.get(ext)
    if grammar is None:
        return ["text"] * len(offsets)
    return _syntax_places(grammar, text, offsets, length)


def find_references(
    paths: list[str], read: Callable[[str], str | None], name: str, limit: int | None = None
) -> tuple[list[FileReferences], int]:
    """The occurrences of ``name`` in the files ``paths`` (read by ``read``; ``None``: unreadable), in path
    order; and how many there are in all (more than returned when ``limit`` cut them)."""
    pattern = word_pattern(name)
    found: list[FileReferences] = []
    total = 0
    for path in paths:
        text = read(path)
        if text is None or name not in text:
            continue
        offsets = [m.start() for m in pattern.finditer(text)]
        if not offsets:
            continue
        total += len(offsets)
        if limit is not None and sum(len(f.references) for f in found) >= limit:
            continue
        places = classify(path, text, offsets, len(name))
        line_starts = line_offsets(text)
        group = FileReferences(path)
        for start, place in zip(offsets, places):
            row = bisect_right(line_starts, start) - 1
            end = text.find("\n", start)
            line = text[line_starts[row] : end if end >= 0 else len(text)]
            group.references.append(Reference(row + 1, start - line_starts[row] + 1, place, line.strip()[:LINE_CHARS]))
        found.append(group)
    return found, total


def as_json(groups: list[FileReferences]) -> list[dict[str, Any]]:
    """The JSON form of grouped references: per file its path, then per place its lines."""
    out = []
    for group in groups:
        by_place: dict[str, list[dict[str, Any]]] = {}
        for ref in group.references:
            by_place.setdefault(ref.place, []).append({"line": ref.line, "column": ref.column, "text": ref.text})
        out.append({"path": group.path, **by_place})
    return out
