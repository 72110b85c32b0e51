"""Tree-sitter grammars: the parser of each grammar named in :mod:`fastrag.indexing.languages`, and
which of its nodes are *scopes* (functions, classes, structs, impl blocks, namespaces, ...).

Each grammar is its own wheel on the package index (``tree-sitter-rust``, ``tree-sitter-cpp``, ...),
loaded on first use; a parser is made once per process. A scope's header (its signature) is indexed
with the chunks nested in it, as the Python chunker does for ``class`` / ``def``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache

import tree_sitter

__all__ = ["GRAMMARS", "LEADING", "Grammar", "parser"]


@dataclass(frozen=True, slots=True)
class Grammar:
    """A tree-sitter grammar: its Python module, the function returning it, and its scope node types."""

    module: str
    function: str
    scopes: frozenset[str]


_C_SCOPES = frozenset({"function_definition", "struct_specifier", "union_specifier", "enum_specifier"})
_CPP_SCOPES = _C_SCOPES | {
    "class_specifier",
    "namespace_definition",
    "template_declaration",
    "linkage_specification",
    "lambda_expression",
}
_JS_SCOPES = frozenset(
    {
        "function_declaration",
        "generator_function_declaration",
        "function_expression",
        "arrow_function",
        "class_declaration",
        "class",
        "method_definition",
    }
)
_TS_SCOPES = _JS_SCOPES | {"abstract_class_declaration", "interface_declaration", "enum_declaration", "internal_module"}

#: Every grammar, by the name :class:`fastrag.indexing.languages.Language` gives it.
GRAMMARS: dict[str, Grammar] = {
    "c": Grammar("tree_sitter_c", "language", _C_SCOPES),
    "cpp": Grammar("tree_sitter_cpp", "language", _CPP_SCOPES),
    "rust": Grammar(
        "tree_sitter_rust",
        "language",
        frozenset(
            {"function_item", "impl_item", "trait_item", "struct_item", "enum_item", "union_item", "mod_item"}
            | {"macro_definition", "closure_expression"}
        ),
    ),
    "go": Grammar(
        "tree_sitter_go",
        "language",
        frozenset({"function_declaration", "method_declaration", "type_declaration", "func_literal"}),
    ),
    "java": Grammar(
        "tree_sitter_java",
        "language",
        frozenset(
            {"class_declaration", "interface_declaration", "enum_declaration", "record_declaration"}
            | {"annotation_type_declaration", "method_declaration", "constructor_declaration"}
        ),
    ),
    "kotlin": Grammar(
        "tree_sitter_kotlin",
        "language",
        frozenset({"class_declaration", "object_declaration", "companion_object", "function_declaration"})
        | {"secondary_constructor", "anonymous_initializer"},
    ),
    "javascript": Grammar("tree_sitter_javascript", "language", _JS_SCOPES),
    "typescript": Grammar("tree_sitter_typescript", "language_typescript", _TS_SCOPES),
    "tsx": Grammar("tree_sitter_typescript", "language_tsx", _TS_SCOPES),
    "bash": Grammar("tree_sitter_bash", "language", frozenset({"function_definition"})),
}

#: Node types (besides comments) that belong to the node after them: attributes and decorators.
LEADING = frozenset({"attribute_item", "attribute_declaration", "decorator"})


@cache
def parser(name: str) -> tree_sitter.Parser:
    """The parser of grammar ``name`` (one per process)."""
    grammar = GRAMMARS[name]
    module = importlib.import_module(grammar.module)
    return tree_sitter.Parser(tree_sitter.Language(getattr(module, grammar.function)()))
