"""Syntax-aware chunker for every language with a tree-sitter grammar (C, C++ and CUDA, Rust, Go, Java,
Kotlin, JavaScript/TypeScript, shell, C#, PHP, Ruby, Swift, Scala, Elixir, Haskell, Lua, Zig, Dart):
tree-sitter nodes packed up to the target size, the way the Python chunker packs ``ast`` statements.

* The top-level nodes are pieces. Comments and attributes (``#[derive]``, ``[[nodiscard]]``,
  ``@decorator``) on lines of their own go with the node after them; a comment or punctuation
  token (``;``, ``,``, a closing ``#endif``) that follows a node goes with it. A piece begins
  right after the previous one ends (at the start of the next line), so blank lines go with what
  follows; the last piece runs to the end of the file.
* A node larger than the target is split along its body: the children between its braces
  (a function's statements, a class's members, an ``impl`` block's functions, a namespace's
  declarations), else, for a node without braces (``#ifdef`` blocks, shell ``if``, a long
  argument list), its children below its first line; a grammar's *block* kinds hold the bodies
  that have neither (Elixir's ``do ... end``, Haskell's ``where`` declarations), and at the top
  level stand for their children. Comments on lines of their own between a header and its body
  (Ruby's, Lua's) go with the body. A wrapper (``template <...>``, ``export``,
  a declaration holding a lambda or a struct) is looked through to the node it wraps. Its
  header, up to the first child, is the first piece; the closing brace goes with the last.
  Recursively, as in :mod:`fastrag.indexing.chunking.python`.
* The headers of the enclosing *scopes* (functions, classes, structs, ``impl`` blocks,
  namespaces: :data:`fastrag.indexing.chunking.grammars.GRAMMARS`), whitespace collapsed, go
  into ``context`` of every chunk that does not contain them. A body that follows its signature
  as a sibling (Dart's ``function_body``) is split with it, the signature as its header.
* A node with nothing to split along (a long statement, a ``ERROR`` node where the parser
  gave up) is split as plain text: paragraphs, lines, words, fixed slices. A file whose
  boundaries do not come out increasing, or nested beyond the recursion limit, is chunked as
  plain text.

Tree-sitter positions are UTF-8 byte offsets; they are mapped to ``str`` offsets by the
positions of the non-ASCII characters (none in most source files).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from itertools import pairwise

from tree_sitter import Node

from fastrag.indexing.chunking.grammars import GRAMMARS, LEADING, Grammar, parse
from fastrag.indexing.chunking.packer import (
    PARAGRAPHS,
    SIGNATURE_LIMIT,
    Chunk,
    Packer,
    Piece,
    chunk_plain,
    resolve_target,
)

__all__ = ["chunk_syntax"]

_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_SPACES = " \t\x0c\r\n"
#: Wrappers looked through when searching a node's body (``export`` → ``class`` → ``class_body``).
_DEPTH = 6


class _Unsupported(Exception):
    """Boundaries that do not increase: chunk this span as plain text."""


class _Item:
    """Consecutive sibling nodes chunked together: leading comments, the node, trailing tokens."""

    __slots__ = ("first", "last", "main")

    def __init__(self, first: Node, main: Node | None, last: Node) -> None:
        self.first = first
        self.main = main
        self.last = last


def _is_comment(node: Node) -> bool:
    """Whether ``node`` is a comment of any grammar (``comment``, ``line_comment``, ...)."""
    return "comment" in node.type


def _items(kids: list[Node], continuations: frozenset[str] = frozenset()) -> list[_Item]:
    """Group sibling nodes into items (see the module docstring); a node of a kind in ``continuations``
    (Dart's function body after its signature) is the main node of the item before it."""
    items: list[_Item] = []
    pending: list[Node] = []
    for kid in kids:
        if kid.start_byte == kid.end_byte:
            continue  # a node the parser made up (a missing ``;``): nothing to cover
        trailing = not kid.is_named or _is_comment(kid)
        if kid.type in continuations and items and not pending:
            items[-1].last = items[-1].main = kid
        elif trailing and items and not pending and kid.start_point.row == items[-1].last.end_point.row:
            items[-1].last = kid
        elif _is_comment(kid) or kid.type in LEADING:
            pending.append(kid)
        elif not kid.is_named and items and not pending:
            items[-1].last = kid
        else:
            items.append(_Item(pending[0] if pending else kid, kid, kid))
            pending = []
    if pending:
        items.append(_Item(pending[0], None, pending[-1]))
    return items


class _SyntaxPacker(Packer):
    """Packer that splits oversized nodes along their bodies."""

    def __init__(self, text: str, target: int, data: bytes, grammar: Grammar) -> None:
        """Prepare chunking ``text``, whose UTF-8 encoding the parser read as ``data``."""
        super().__init__(text, target)
        self.grammar = grammar
        # byte offset of every non-ASCII character, and the extra bytes up to and including it
        self._wide: list[int] = []
        self._extra: list[int] = []
        if len(data) != len(text):
            extra = 0
            for match in _NON_ASCII.finditer(text):
                self._wide.append(match.start() + extra)
                extra += len(match.group().encode("utf-8", "surrogatepass")) - 1
                self._extra.append(extra)

    def char(self, offset: int) -> int:
        """``str`` offset of UTF-8 byte ``offset`` (a character boundary)."""
        if not self._wide:
            return offset
        i = bisect_left(self._wide, offset)
        return offset - (self._extra[i - 1] if i else 0)

    def gap(self, prev_end: int, cur_start: int) -> int:
        """Boundary between consecutive items: the line start after ``prev_end`` if ``cur_start``
        is on a later line, else ``cur_start``."""
        text = self.text
        while prev_end > 0 and text[prev_end - 1] in _SPACES:  # a node that ends with the next
            prev_end -= 1  # line's indentation (Scala's indented definitions)
        ls = self.line_starts
        i = bisect_left(ls, prev_end)
        after = ls[i] if i < len(ls) else self.n
        return min(after, cur_start)

    def pieces(self, items: list[_Item], start: int, end: int, ctx: str) -> list[Piece]:
        """One piece per item, covering ``[start, end)``."""
        char = self.char
        bounds = [start]
        bounds += [self.gap(char(a.last.end_byte), char(b.first.start_byte)) for a, b in pairwise(items)]
        bounds.append(end)
        if any(a >= b for a, b in pairwise(bounds)):
            raise _Unsupported(bounds)
        return [
            (a, b, ctx, ctx, item.main if item.main is not None else PARAGRAPHS)
            for a, b, item in zip(bounds, bounds[1:], items)
        ]

    def items(self, kids: list[Node]) -> list[_Item]:
        """The items of sibling nodes ``kids``, each block node among them (Haskell's ``declarations``)
        replaced by its children."""
        blocks = self.grammar.blocks
        if blocks:
            kids = [inner for kid in kids for inner in (kid.children if kid.type in blocks else (kid,))]
        return _items(kids, self.grammar.continuations)

    def module_pieces(self, root: Node) -> list[Piece]:
        """Pieces of the top-level nodes covering the whole file."""
        items = self.items(root.children)
        if not items:
            return [(0, self.n, "", "", PARAGRAPHS)]
        return self.pieces(items, 0, self.n, "")

    def body(self, node: Node) -> tuple[list[Node], bool]:
        """The children ``node`` is split along, and whether it (or a node it wraps) is a scope."""
        grammar = self.grammar
        scope = grammar.is_scope(node)
        outer = node
        for _ in range(_DEPTH):
            if node.type == "ERROR":
                return [], scope
            body = node.child_by_field_name("body")
            if body is None and grammar.blocks:
                body = next((kid for kid in node.named_children if kid.type in grammar.blocks), None)
            if body is not None and body.child_count:
                return _leading_comments(node, body) + _inside(body, grammar.blocks), scope
            if any(kid.type == "{" for kid in node.children):
                return _inside(node, grammar.blocks), scope
            braced = [kid for kid in node.children if kid.child_count and kid.children[0].type == "{"]
            if braced:
                return _inside(max(braced, key=_size), grammar.blocks), scope
            named = node.named_children
            if not named:
                return [], scope
            biggest = max(named, key=_size)
            if 2 * _size(biggest) <= _size(node):
                break
            node = biggest
            scope = scope or grammar.is_scope(node)
        row = outer.start_point.row if node is outer else node.start_point.row
        return [kid for kid in node.children if kid.start_point.row > row], scope

    def header_end(self, start: int, first: int) -> int:
        """Where a header beginning at ``start`` ends before its first child at ``first``: the start
        of the child's line if only indentation precedes it there."""
        ls = self.line_starts
        line = ls[bisect_right(ls, first) - 1]
        if line > start and not self.text[line:first].strip(_SPACES):
            return line
        return first

    def split_node(self, piece: Piece) -> list[Piece]:
        """Split an oversized node into its header and body children."""
        start, end, ctx, _, node = piece
        if not isinstance(node, Node):
            return super().split_node(piece)
        kids, scope = self.body(node)
        items = self.items(kids)
        if not items:
            return self.split_text((start, end, ctx, ctx, PARAGRAPHS))
        header_end = self.header_end(start, self.char(items[0].first.start_byte))
        inner = ctx
        head = node
        if node.type in self.grammar.continuations and node.prev_named_sibling is not None:
            head = node.prev_named_sibling  # the signature a continuation follows
            scope = scope or self.grammar.is_scope(head)
        if scope:
            signature = " ".join(self.text[self.char(head.start_byte) : header_end].split())
            signature = signature.removesuffix("{").rstrip()[:SIGNATURE_LIMIT]
            inner = f"{ctx}\n{signature}" if ctx and signature else ctx or signature
        try:
            if not start < header_end:
                raise _Unsupported(start, header_end)
            body = self.pieces(items, header_end, end, inner)
        except _Unsupported:
            return self.split_text((start, end, ctx, ctx, PARAGRAPHS))
        return [(start, header_end, ctx, inner, PARAGRAPHS), *body]


def _size(node: Node) -> int:
    """Bytes spanned by ``node``."""
    return node.end_byte - node.start_byte


def _leading_comments(node: Node, body: Node) -> list[Node]:
    """The comments of ``node`` on lines of their own before its ``body`` child (Ruby's and Lua's
    comments above a class's or function's first statement): they go with the body, not the header."""
    return [
        kid
        for kid in node.children
        if (_is_comment(kid) or kid.type in LEADING)
        and kid.end_byte <= body.start_byte
        and kid.prev_sibling is not None
        and kid.prev_sibling.end_point.row < kid.start_point.row
    ]


def _inside(node: Node, blocks: frozenset[str] = frozenset()) -> list[Node]:
    """Children of a braced node between its ``{`` and its last ``}``; a single named child that
    holds the statements (Go's ``statement_list``, a grammar's ``blocks``: Swift's ``statements``)
    is looked through."""
    kids = node.children
    if node.type in blocks:  # its opening keyword (Elixir's ``do``) stays with the header
        kids = kids[next((i for i, kid in enumerate(kids) if kid.is_named), len(kids)) :]
    opening = next((i for i, kid in enumerate(kids) if kid.type == "{"), -1)
    closing = next((i for i in range(len(kids) - 1, opening, -1) if kids[i].type == "}"), len(kids))
    inner = kids[opening + 1 : closing]
    if len(inner) == 1 and inner[0].child_count > 1 and (inner[0].type.endswith("_list") or inner[0].type in blocks):
        return inner[0].children
    return inner


def chunk_syntax(grammar: str, text: str, max_chunk_size: int, target_size: int | None = None) -> list[Chunk]:
    """Chunk ``text`` along the syntax tree of tree-sitter grammar ``grammar`` (plain text on trouble)."""
    target = resolve_target(max_chunk_size, target_size)
    if len(text) <= target:  # one chunk whatever the tree: no need to parse
        return chunk_plain(text, max_chunk_size, target)
    try:
        data, tree = parse(grammar, text)
        packer = _SyntaxPacker(text, target, data, GRAMMARS[grammar])
        packer.pack(packer.module_pieces(tree.root_node))
    except (_Unsupported, RecursionError):
        return chunk_plain(text, max_chunk_size, target)
    return packer.chunks
