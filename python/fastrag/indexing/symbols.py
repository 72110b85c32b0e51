"""The definitions a file makes, found at index time from the parses the chunkers use.

* Python (``ast``): classes, functions (methods inside a class), module- and class-level assignments
  (constants when the name is upper case, else variables); not what a script's ``if __name__ == "__main__":``
  block defines (its local variables).
* Every tree-sitter grammar of :data:`~fastrag.indexing.chunking.grammars.GRAMMARS`, table-driven: a
  definition is a node of the grammar's *scopes* (:meth:`~fastrag.indexing.chunking.grammars.Grammar.is_scope`:
  a scope kind or a scope call such as Elixir's ``defmodule``; or of :data:`EXTRA_DEFINITIONS`) that has
  a name — the grammar's (:meth:`~fastrag.indexing.chunking.grammars.Grammar.name_of`), its ``name``
  field, else the end of its ``declarator`` chain (C and C++), else its ``type`` field
  (Rust's ``impl``), else its first identifier-like child, else (an unnamed function assigned to
  something) the ``name`` of its parent.
  Its kind comes from its node type (:func:`kind_of`), so a grammar added to the table needs no code here.
* Every file also defines a *module*: its name without suffix (the folder's name for ``__init__.py``,
  ``mod.rs``, ``index.js``...).

A C or C++ ``struct``/``class``/``union``/``enum`` without a body is a forward *declaration* (ranked
after the definition). Each definition has its 1-based first and last line, a signature (the header up to its body,
whitespace collapsed) and its parent (the enclosing definition), so that a file's outline is a tree.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

import tree_sitter

from fastrag.indexing.chunking.grammars import CALL, GRAMMARS, language, parse
from fastrag.indexing.chunking.python import parse_python
from fastrag.indexing.languages import GRAMMAR_OF_SUFFIX

__all__ = [
    "EXTRA_DEFINITIONS",
    "KINDS",
    "SYMBOL_COLUMNS",
    "Symbol",
    "file_symbols",
    "is_parsed",
    "kind_of",
    "module_name",
    "symbols_table",
]

#: Kinds of definition, the order :func:`~fastrag.retrieval.symbols.find_definitions` ranks them in.
KINDS = (
    "class", "type", "function", "method", "macro", "constant", "module", "variable", "impl", "declaration", "other",
)  # fmt: skip
#: Node types that define a name although they are not scopes of their grammar (no body to split).
EXTRA_DEFINITIONS = frozenset(
    {
        "type_alias_declaration", "type_item", "const_item", "static_item", "type_definition",
        "preproc_def", "preproc_function_def", "const_spec", "type_spec", "alias_declaration",
    }
)  # fmt: skip
#: Longest signature kept.
SIGNATURE_CHARS = 200
#: Parts of a node type that name its kind, first match wins (``class_declaration`` → class).
_KIND_WORDS: tuple[tuple[str, str], ...] = (
    ("impl", "impl"),
    ("class", "class"),
    ("object", "class"),
    ("record", "class"),
    ("interface", "type"),
    ("trait", "type"),
    ("protocol", "type"),
    ("struct", "type"),
    ("union", "type"),
    ("enum", "type"),
    ("type", "type"),
    ("constructor", "method"),
    ("method", "method"),
    ("function", "function"),
    ("func", "function"),
    ("namespace", "module"),
    ("module", "module"),
    ("mod_", "module"),
    ("macro", "macro"),
    ("preproc", "macro"),
    ("const", "constant"),
    ("static", "constant"),
    ("def", "function"),  # a scope call of a macro language: ``def``, ``defp`` (``defmodule`` is a module above)
)
#: Suffixes of a file named after its folder (``pkg/__init__.py`` is module ``pkg``).
_INDEX_STEMS = frozenset({"__init__", "mod", "index", "lib", "main"})
_NEWLINE = re.compile(r"\n")
_QUALIFIED = re.compile(r"(?:::|\.|->|\\)")


@dataclass(frozen=True, slots=True)
class Symbol:
    """One definition: its name, kind (one of :data:`KINDS`), lines (1-based, inclusive), signature,
    and its parent's position in the file's list (``-1``: top level)."""

    name: str
    kind: str
    first: int
    last: int
    signature: str
    parent: int = -1

    def to_json(self) -> list[Any]:
        """Compact JSON form: ``[name, kind, first, last, signature, parent]``."""
        return [self.name, self.kind, self.first, self.last, self.signature, self.parent]

    @classmethod
    def from_json(cls, raw: list[Any]) -> Symbol:
        """Inverse of :meth:`to_json`."""
        name, kind, first, last, signature, parent = raw
        return cls(str(name), str(kind), int(first), int(last), str(signature), int(parent))


#: The columns of a generation's symbols table (``symbols.json``): per definition, its file (position in the
#: chunk table's paths), name, kind, first and last line, signature and parent (position in the table, ``-1``).
SYMBOL_COLUMNS = ("file", "name", "kind", "first", "last", "signature", "parent")


def symbols_table(per_file: list[list[Symbol]]) -> dict[str, list[Any]]:
    """The symbols table of an index whose files (in chunk-table order) define ``per_file``."""
    table: dict[str, list[Any]] = {column: [] for column in SYMBOL_COLUMNS}
    files, names, kinds, firsts, lasts, signatures, parents = (table[column] for column in SYMBOL_COLUMNS)
    for file, symbols in enumerate(per_file):
        base = len(names)
        files.extend([file] * len(symbols))
        names.extend([s.name for s in symbols])
        kinds.extend([s.kind for s in symbols])
        firsts.extend([s.first for s in symbols])
        lasts.extend([s.last for s in symbols])
        signatures.extend([s.signature for s in symbols])
        parents.extend([base + s.parent if s.parent >= 0 else -1 for s in symbols])
    return table


def line_offsets(text: str) -> list[int]:
    """Offset at which each line of ``text`` starts, lines broken at ``\\n`` as a :class:`Symbol`'s
    1-based line numbers count them: line ``n`` starts at ``line_offsets(text)[n - 1]``."""
    return [0, *(m.end() for m in _NEWLINE.finditer(text))]


def kind_of(node_type: str) -> str:
    """The kind of a tree-sitter definition node, from the words of its type."""
    return next((kind for word, kind in _KIND_WORDS if word in node_type), "other")


def module_name(rel_path: str) -> str:
    """The module a file defines: its name without suffix, or its folder's for ``__init__.py`` and the like."""
    folder, name = os.path.split(rel_path)
    stem = name.split(".", 1)[0] if not name.startswith(".") else name
    if stem in _INDEX_STEMS and folder:
        return os.path.basename(folder)
    return stem


_PYTHON = (".py", ".pyi")


def is_parsed(rel_path: str) -> bool:
    """Whether :func:`file_symbols` parses the file (Python or a grammar's suffix), rather than
    knowing only the module it is."""
    ext = os.path.splitext(rel_path)[1].lower()
    return ext in _PYTHON or ext in GRAMMAR_OF_SUFFIX


def file_symbols(rel_path: str, text: str) -> list[Symbol]:
    """Every definition of ``text``, the content of ``rel_path``: the module first, then in source order."""
    lines = len(text.splitlines()) or 1
    symbols = [Symbol(module_name(rel_path), "module", 1, lines, rel_path)]  # every other one's root
    ext = os.path.splitext(rel_path)[1].lower()
    try:
        if ext in _PYTHON:
            symbols += _python_symbols(text)
        elif ext in GRAMMAR_OF_SUFFIX:
            symbols += _syntax_symbols(GRAMMAR_OF_SUFFIX[ext], text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass  # unparseable: the module alone
    module, inner = symbols[0], symbols[1:]
    return [module] + [
        Symbol(d.name, d.kind, d.first, d.last, d.signature, d.parent + 1 if d.parent >= 0 else 0) for d in inner
    ]


def _collapse(text: str) -> str:
    return " ".join(text.split())[:SIGNATURE_CHARS]


# --------------------------------------------------------------------------- Python


def _main_guard(node: ast.stmt) -> bool:
    """Whether ``node`` is ``if __name__ == "__main__":``: a script's own code, whose names (``console =
    Console()`` in a demo) are its local variables, not the module's definitions."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare) or len(node.test.comparators) != 1:
        return False
    sides = [node.test.left, node.test.comparators[0]]
    named = any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides)
    return named and any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides)


def _python_symbols(text: str) -> list[Symbol]:
    """Definitions of Python source (positions relative to the symbols after the module)."""
    tree = parse_python(text)
    lines = text.removeprefix("\ufeff").splitlines()
    out: list[Symbol] = []

    def header(node: ast.stmt, body: list[ast.stmt]) -> str:
        first = node.lineno
        last = max(first, body[0].lineno - 1) if body else first
        if body and body[0].lineno == first:
            return _collapse(lines[first - 1]) if first - 1 < len(lines) else ""
        return _collapse(" ".join(lines[first - 1 : last]))

    def visit(body: list[ast.stmt], parent: int, in_class: bool) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                kind = "class" if isinstance(node, ast.ClassDef) else ("method" if in_class else "function")
                out.append(
                    Symbol(
                        node.name, kind, node.lineno, node.end_lineno or node.lineno, header(node, node.body), parent
                    )
                )
                here = len(out) - 1
                visit(node.body, here, isinstance(node, ast.ClassDef))
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and (parent < 0 or in_class):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        kind = "constant" if target.id.isupper() else "variable"
                        line = lines[node.lineno - 1] if node.lineno - 1 < len(lines) else ""
                        end = node.end_lineno or node.lineno
                        out.append(Symbol(target.id, kind, node.lineno, end, _collapse(line), parent))
            elif isinstance(node, (ast.If, ast.Try, ast.With)) and parent < 0 and not _main_guard(node):
                visit([*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])], parent, in_class)

    visit(tree.body, -1, False)
    return out


# --------------------------------------------------------------------------- tree-sitter


def _node_name(node: Any) -> Any:
    """The node holding a definition's name, or ``None`` (see the module docstring)."""
    named = node.child_by_field_name("name")
    if named is not None:
        return named
    declarator = node.child_by_field_name("declarator")
    depth = 0
    while declarator is not None and depth < 8:
        inner = declarator.child_by_field_name("declarator") or declarator.child_by_field_name("name")
        if inner is None:
            return declarator
        declarator, depth = inner, depth + 1
    typed = node.child_by_field_name("type")  # Rust's ``impl Trait for Type``: the type
    if typed is not None:
        return typed
    for kid in node.named_children:
        if kid.type.endswith("identifier") or kid.type in ("constant", "name", "word"):
            return kid
    for kid in node.named_children:  # Go's type_declaration holds a type_spec that names it
        inner = kid.child_by_field_name("name")
        if inner is not None and kid.type.endswith("_spec"):
            return inner
    return None


@cache
def _definition_query(grammar: str) -> tree_sitter.Query:
    """A query capturing every named node of a kind that may define a name in ``grammar``: its scopes,
    :data:`EXTRA_DEFINITIONS`, and calls when some call opens a scope (kinds it lacks left out)."""
    table = GRAMMARS[grammar]
    lang = language(grammar)
    kinds = table.scopes | EXTRA_DEFINITIONS | ({CALL[0]} if table.scope_calls else set())
    known = sorted(k for k in kinds if lang.id_for_node_kind(k, True))
    query: tree_sitter.Query = tree_sitter.Query(lang, "[" + " ".join(f"({k})" for k in known) + "] @definition")
    return query


def _syntax_symbols(grammar: str, text: str) -> list[Symbol]:
    """Definitions found along the syntax tree of ``grammar``.

    The query (:func:`_definition_query`) finds the candidate nodes in the tree-sitter library,
    outer before inner; a candidate's parent is the innermost named definition whose bytes hold it.
    """
    data, tree = parse(grammar, text)
    table = GRAMMARS[grammar]
    out: list[Symbol] = []
    open_ends: list[tuple[int, int]] = []  # (end byte, index in out) of the definitions around the node
    captured = tree_sitter.QueryCursor(_definition_query(grammar)).captures(tree.root_node)
    for node in sorted(captured.get("definition", []), key=lambda n: (n.start_byte, -n.end_byte)):
        while open_ends and open_ends[-1][0] < node.end_byte:
            open_ends.pop()
        if node.type == CALL[0] and not table.is_scope(node):
            continue
        name_node = table.name_of(node) or _node_name(node)
        if name_node is None and node.parent is not None:  # an unnamed function given a name
            name_node = node.parent.child_by_field_name("name")
        if name_node is None:
            continue
        raw = data[name_node.start_byte : name_node.end_byte].decode("utf-8", "replace")
        name = _QUALIFIED.split(raw.strip())[-1].strip("*& ") if raw.strip() else ""
        if name and len(name) <= 200 and "\n" not in name:
            parent = open_ends[-1][1] if open_ends else -1
            out.append(_syntax_symbol(node, name, data, parent, out))
            open_ends.append((node.end_byte, len(out) - 1))
    order = sorted(range(len(out)), key=lambda i: (out[i].first, i))
    where = {old: new for new, old in enumerate(order)}
    return [
        Symbol(s.name, s.kind, s.first, s.last, s.signature, where[s.parent] if s.parent >= 0 else -1)
        for s in (out[i] for i in order)
    ]


def _syntax_symbol(node: Any, name: str, data: bytes, parent: int, found: list[Symbol]) -> Symbol:
    """The :class:`Symbol` of a definition node."""
    target = node.child_by_field_name(CALL[1]) if node.type == CALL[0] else None
    kind = kind_of(target.text.decode("utf-8", "replace") if target is not None and target.text else node.type)
    body = node.child_by_field_name("body")
    if kind == "function" and parent >= 0 and found[parent].kind in ("class", "type", "impl"):
        kind = "method"
    elif kind in ("class", "type") and body is None and node.type.endswith("_specifier"):
        kind = "declaration"  # C/C++ ``struct S;``, ``class C;``: a forward declaration
    end = body.start_byte if body is not None and body.start_byte > node.start_byte else node.end_byte
    head = data[node.start_byte : min(end, node.start_byte + 4 * SIGNATURE_CHARS)].decode("utf-8", "replace")
    if body is None:
        head = head.split("\n", 1)[0]
    return Symbol(name, kind, node.start_point.row + 1, node.end_point.row + 1, _collapse(head.rstrip("{ \n")), parent)
