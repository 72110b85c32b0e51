"""Python chunker: ``ast`` statements packed up to the target size.

* Top-level statements are pieces. A statement's piece begins right after the previous
  statement ends (at the start of the next line), so leading comments, blank lines and
  decorators go with the statement they precede; trailing comments on the last line of a
  statement stay with it. The last piece runs to the end of the file.
* A compound statement larger than the target is split along its own body statements
  (``body``, ``except`` handlers, ``else``, ``finally``, ``case`` bodies), recursively. Its
  header (decorators, signature, and for a ``class``/``def`` the docstring) is the first
  piece, packed with the following body statements when they fit.
* ``class``/``def`` headers (signature only, whitespace collapsed) of the enclosing scopes go
  into ``context`` of every chunk that does not contain them.
* A simple statement (or header) still larger than the target is split as plain text:
  paragraphs, lines, words, fixed slices.
* Files that do not parse (``SyntaxError``; ``ValueError`` for NUL bytes; ``RecursionError``
  for deeply nested code; syntax newer than the running interpreter) use the plain chunker.

``ast`` positions are line numbers plus UTF-8 byte columns; line starts come from the native
core and byte columns are converted by it only on lines that hold non-ASCII text.
"""

from __future__ import annotations

import ast
import gc
import warnings
from functools import lru_cache
from itertools import pairwise

import fastrag._core
from fastrag.indexing.chunking.packer import (
    PARAGRAPHS,
    SIGNATURE_LIMIT,
    Chunk,
    Packer,
    Piece,
    chunk_plain,
    resolve_target,
)

__all__ = ["chunk_python"]

_Node = ast.stmt | ast.excepthandler
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_BODY_FIELDS = ("body", "handlers", "orelse", "finalbody")
_INDENT = " \t\x0c"


class _Unsupported(Exception):
    """Positions that do not yield increasing boundaries: use the plain chunker."""


def _children(node: _Node) -> list[_Node]:
    """Statements (and ``except`` handlers) nested directly in ``node``, in source order."""
    kids: list[_Node] = []
    for field in _BODY_FIELDS:
        seq = getattr(node, field, None)
        if isinstance(seq, list):
            kids.extend(seq)
    cases = getattr(node, "cases", None)
    if isinstance(cases, list):
        for case in cases:
            kids.extend(case.body)
    return kids


def _first_line(node: _Node) -> int:
    """Line of the first decorator, or of the statement itself."""
    decorators = getattr(node, "decorator_list", None)
    if decorators:
        return int(decorators[0].lineno)
    return node.lineno


def _end_line(node: _Node) -> int:
    """Last line of ``node``."""
    return node.end_lineno if node.end_lineno is not None else node.lineno


def _is_docstring(node: _Node) -> bool:
    """Whether ``node`` is a string-literal expression statement."""
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


class _PythonPacker(Packer):
    """Packer that splits oversized statements along their body statements."""

    def __init__(self, text: str, target: int, bom: bool) -> None:
        """Prepare chunking ``text`` (``bom``: ``ast`` saw it without its leading BOM)."""
        super().__init__(text, target)
        self.ascii = text.isascii()
        self.bom = bom

    def _line(self, line: int) -> tuple[int, int]:
        """``(start, end)`` str offsets of 1-based ``line``, line break included."""
        ls = self.line_starts
        return ls[line - 1], (ls[line] if line < len(ls) else self.n)

    def char(self, line: int, col: int) -> int:
        """Str offset of ``ast`` position ``(line, UTF-8 byte column)``."""
        start, end = self._line(line)
        if self.ascii:
            return start + col
        if line == 1 and self.bom:
            col += 3
        segment = self.text[start:end]
        if segment.isascii():
            return start + col
        return start + int(fastrag._core.bytes_to_chars(segment, [col])[0])

    def _starts_line(self, node: _Node) -> bool:
        """Whether only indentation precedes ``node`` on its first line."""
        if getattr(node, "decorator_list", None):
            return True  # a decorator always begins a logical line
        start, end = self._line(node.lineno)
        line = self.text[start:end]
        return len(line) - len(line.lstrip(_INDENT)) == node.col_offset

    def gap(self, prev: _Node, cur: _Node) -> int:
        """Boundary between consecutive siblings: the line after ``prev`` ends."""
        prev_end = _end_line(prev)
        if _first_line(cur) > prev_end:
            return self.line_starts[prev_end]
        return self.char(cur.lineno, cur.col_offset)

    def header_end(self, node: _Node, first: _Node) -> int:
        """Where the header of compound ``node`` ends and its first body statement begins.

        Comment and blank lines just above the first statement go with that statement.
        """
        if not self._starts_line(first):
            return self.char(first.lineno, first.col_offset)
        line = _first_line(first)
        text = self.text
        while line - 1 > node.lineno:
            start, end = self._line(line - 1)
            stripped = text[start:end].strip()
            if stripped and not stripped.startswith("#"):
                break
            line -= 1
        return self.line_starts[line - 1]

    def signature(self, node: _Node, first: _Node) -> str:
        """Header text of a ``class``/``def`` without decorators, whitespace collapsed."""
        start = self._line(node.lineno)[0]
        header = " ".join(self.text[start : self.header_end(node, first)].split())
        return header[:SIGNATURE_LIMIT]

    def pieces(self, nodes: list[_Node], bounds: list[int], ctx: str) -> list[Piece]:
        """One piece per node between consecutive ``bounds``."""
        if any(a >= b for a, b in pairwise(bounds)):
            raise _Unsupported(bounds)
        return [(a, b, ctx, ctx, node) for a, b, node in zip(bounds, bounds[1:], nodes)]

    def module_pieces(self, tree: ast.Module) -> list[Piece]:
        """Pieces of the top-level statements covering the whole file."""
        body: list[_Node] = list(tree.body)
        if not body:
            return [(0, self.n, "", "", PARAGRAPHS)]
        bounds = [0] + [self.gap(a, b) for a, b in pairwise(body)] + [self.n]
        return self.pieces(body, bounds, "")

    def split_node(self, piece: Piece) -> list[Piece]:
        """Split an oversized statement into its header and body statements."""
        start, end, ctx, _, node = piece
        if not isinstance(node, (ast.stmt, ast.excepthandler)):
            return super().split_node(piece)
        kids = _children(node)
        if not kids:
            return self.split_text((start, end, ctx, ctx, PARAGRAPHS))
        inner = ctx
        if isinstance(node, _SCOPES):
            sig = self.signature(node, kids[0])
            inner = f"{ctx}\n{sig}" if ctx else sig
            if _is_docstring(kids[0]):
                if len(kids) == 1:
                    return self.split_text((start, end, ctx, inner, PARAGRAPHS))
                header_end = self.gap(kids[0], kids[1])
                kids = kids[1:]
            else:
                header_end = self.header_end(node, kids[0])
        else:
            header_end = self.header_end(node, kids[0])
        if not start < header_end:
            raise _Unsupported(start, header_end)
        bounds = [header_end] + [self.gap(a, b) for a, b in pairwise(kids)] + [end]
        return [(start, header_end, ctx, inner, PARAGRAPHS), *self.pieces(kids, bounds, inner)]


@lru_cache(maxsize=1)
def parse_python(text: str) -> ast.Module:
    """``ast.parse`` of ``text`` (a leading byte-order mark skipped), without warnings and without
    cyclic garbage collection; raises what ``ast.parse`` raises.

    An ``ast`` tree holds no reference cycles, so pausing the collector while it is built
    only skips useless generation scans (about 15% of the parse time on vLLM). The last tree is
    kept: the chunker and the symbols table read each file one after the other, and the second
    gets the first's tree (callers must not edit it).
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text.removeprefix("\ufeff"))
    finally:
        if collecting:
            gc.enable()


def chunk_python(text: str, max_chunk_size: int, target_size: int | None = None) -> list[Chunk]:
    """Chunk Python source along its ``ast`` statements (plain text if it does not parse)."""
    target = resolve_target(max_chunk_size, target_size)
    if not text:
        return []
    bom = text.startswith("\ufeff")
    try:
        tree = parse_python(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return chunk_plain(text, max_chunk_size, target)
    packer = _PythonPacker(text, target, bom)
    try:
        packer.pack(packer.module_pieces(tree))
    except (_Unsupported, RecursionError):
        return chunk_plain(text, max_chunk_size, target)
    return packer.chunks
