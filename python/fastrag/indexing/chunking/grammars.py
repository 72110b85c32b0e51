"""Tree-sitter grammars: the parser of each grammar named in :mod:`fastrag.indexing.languages`, and
which of its nodes are *scopes*: the definitions (functions, methods, classes, modules, structs,
``impl``/``extension``/``protocol`` blocks, traits and typeclasses, instances, namespaces, ...).

A scope names itself through its ``name`` field where the grammar has one (:meth:`Grammar.name_of`).
A grammar whose definitions are calls (Elixir's ``defmodule``/``def`` are ``call`` nodes) lists the
call targets that open a scope in :attr:`Grammar.scope_calls`. A grammar whose bodies are neither
braced nor a ``body`` field (Haskell's ``where`` declarations, Elixir's ``do ... end``) names the node
kinds holding them in :attr:`Grammar.blocks`; one whose function bodies follow their signature as a
sibling (Dart) names those in :attr:`Grammar.continuations`.

Each grammar is its own wheel on the package index (``tree-sitter-rust``, ``tree-sitter-cpp``, ...),
loaded on first use; a parser is made once per process. A scope's header (its signature) is indexed
with the chunks nested in it, as the Python chunker does for ``class`` / ``def``.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from functools import cache, lru_cache

import tree_sitter
from tree_sitter import Node

__all__ = ["CALL", "GRAMMARS", "LEADING", "Grammar", "language", "parse", "parser", "parser_bytes"]

#: How tree-sitter grammars of macro languages write a call: its node kind and the field of its target.
CALL = ("call", "target")


@dataclass(frozen=True, slots=True)
class Grammar:
    """A tree-sitter grammar: its Python module, the function returning it, its scope node kinds, the
    call targets that open a scope, the node kinds that hold a body without braces (also looked through
    at the top level), and the node kinds that continue the node before them (see the module docstring)."""

    module: str
    function: str
    scopes: frozenset[str]
    scope_calls: frozenset[str] = frozenset()
    blocks: frozenset[str] = frozenset()
    continuations: frozenset[str] = frozenset()

    def is_scope(self, node: Node) -> bool:
        """Whether ``node`` is a definition: a scope kind, or a call of one of :attr:`scope_calls`."""
        if node.type in self.scopes:
            return True
        if not self.scope_calls or node.type != CALL[0]:
            return False
        target = node.child_by_field_name(CALL[1])
        return target is not None and target.text is not None and target.text.decode() in self.scope_calls

    def name_of(self, node: Node) -> Node | None:
        """The node naming scope ``node``: its ``name`` field, else for a scope call the called name
        of its first argument (``run`` of ``def run(a) when a > 0``, ``Foo.Bar`` of ``defmodule Foo.Bar``)."""
        name = node.child_by_field_name("name")
        if name is not None or not self.scope_calls or node.type != CALL[0]:
            return name
        arguments = next((kid for kid in node.named_children if kid.type == "arguments"), None)
        first = arguments.named_children[0] if arguments is not None and arguments.named_children else None
        while first is not None and first.type == "binary_operator":  # a guard: ``run(a) when a > 0``
            first = first.child_by_field_name("left")
        if first is not None and first.type == CALL[0]:
            first = first.child_by_field_name(CALL[1])
        return first


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
    "c_sharp": Grammar(
        "tree_sitter_c_sharp",
        "language",
        frozenset(
            {"namespace_declaration", "file_scoped_namespace_declaration", "class_declaration", "struct_declaration"}
            | {"interface_declaration", "enum_declaration", "record_declaration", "method_declaration"}
            | {"constructor_declaration", "destructor_declaration", "operator_declaration", "indexer_declaration"}
            | {"conversion_operator_declaration", "property_declaration", "local_function_statement"}
        ),
    ),
    "php": Grammar(
        "tree_sitter_php",
        "language_php",
        frozenset(
            {"namespace_definition", "class_declaration", "interface_declaration", "trait_declaration"}
            | {"enum_declaration", "function_definition", "method_declaration", "anonymous_class"}
        ),
    ),
    "ruby": Grammar(
        "tree_sitter_ruby", "language", frozenset({"module", "class", "singleton_class", "method", "singleton_method"})
    ),
    "swift": Grammar(
        "tree_sitter_swift",
        "language",
        # class_declaration is also struct, enum, extension and actor (its declaration_kind field)
        frozenset({"class_declaration", "protocol_declaration", "function_declaration", "init_declaration"})
        | {"deinit_declaration", "subscript_declaration", "protocol_function_declaration"},
        blocks=frozenset({"statements"}),
    ),
    "scala": Grammar(
        "tree_sitter_scala",
        "language",
        frozenset({"class_definition", "object_definition", "trait_definition", "enum_definition"})
        | {"function_definition", "given_definition", "extension_definition", "package_object", "package_clause"},
    ),
    "elixir": Grammar(
        "tree_sitter_elixir",
        "language",
        frozenset(),
        scope_calls=frozenset(
            {"defmodule", "defprotocol", "defimpl", "def", "defp", "defmacro", "defmacrop", "defguard", "defguardp"}
            | {"defdelegate"}
        ),
        blocks=frozenset({"do_block"}),
    ),
    "haskell": Grammar(
        "tree_sitter_haskell",
        "language",
        frozenset({"class", "instance", "data_type", "newtype", "type_family", "data_family", "type_synonym"})
        | {"function", "bind"},
        blocks=frozenset({"imports", "declarations", "class_declarations", "instance_declarations"}),
    ),
    "lua": Grammar("tree_sitter_lua", "language", frozenset({"function_declaration", "function_definition"})),
    "zig": Grammar(
        "tree_sitter_zig",
        "language",
        frozenset({"function_declaration", "test_declaration", "struct_declaration", "enum_declaration"})
        | {"union_declaration", "opaque_declaration", "error_set_declaration"},
    ),
    "dart": Grammar(
        "tree_sitter_dart",
        "language",
        frozenset({"class_definition", "mixin_declaration", "extension_declaration", "extension_type_declaration"})
        | {"enum_declaration", "function_signature", "method_signature", "local_function_declaration"},
        continuations=frozenset({"function_body"}),
    ),
}

#: Node types (besides comments) that belong to the node after them: attributes and decorators, and
#: Haskell's documentation comments (``-- |``).
LEADING = frozenset({"attribute_item", "attribute_declaration", "decorator", "haddock"})


@cache
def language(name: str) -> tree_sitter.Language:
    """The tree-sitter language of grammar ``name`` (one per process)."""
    grammar = GRAMMARS[name]
    module = importlib.import_module(grammar.module)
    return tree_sitter.Language(getattr(module, grammar.function)())


@cache
def parser(name: str) -> tree_sitter.Parser:
    """The parser of grammar ``name`` (one per process)."""
    return tree_sitter.Parser(language(name))


_SURROGATE = re.compile("[\ud800-\udfff]")


def parser_bytes(text: str) -> bytes:
    """The UTF-8 bytes a parser reads for ``text``: lone surrogates (undecodable bytes of the file) become
    U+FFFD, which keeps every character's position."""
    return _SURROGATE.sub("\ufffd", text).encode("utf-8")


@lru_cache(maxsize=1)
def parse(grammar: str, text: str) -> tuple[bytes, tree_sitter.Tree]:
    """The bytes (:func:`parser_bytes`) and the syntax tree of ``text`` under ``grammar``.

    The last parse is kept: the chunker and the symbols table read each file one after the other,
    and the second gets the first's tree instead of parsing again (the parse is about half of what
    either costs). Callers must not edit the tree.
    """
    data = parser_bytes(text)
    return data, parser(grammar).parse(data)
