"""Chunkers: split a file into spans ``text[start:end]`` for indexing.

Every chunker returns sorted, non-overlapping :class:`Chunk` spans of 1..``target_size``
characters (``target_size`` defaults to, and may not exceed, ``max_chunk_size``) that cover
every non-whitespace character of the file; no chunk is whitespace only. Offsets are Python
``str`` indices, end exclusive. All functions are pure top-level functions (picklable), so
they can run in worker processes.

* ``.py`` / ``.pyi``: :func:`chunk_python` (``ast`` statements, see
  :mod:`fastrag.indexing.chunking.python`);
* ``.md`` / ``.markdown`` / ``.rst``: :func:`chunk_markdown` (heading tree, see
  :mod:`fastrag.indexing.chunking.markdown`);
* C, C++/CUDA, Rust, Go, Java/Kotlin, JavaScript/TypeScript, shell, C#, PHP, Ruby, Swift, Scala,
  Elixir, Haskell, Lua, Zig, Dart (the suffixes with a tree-sitter grammar in
  :mod:`fastrag.indexing.languages`): :func:`chunk_syntax` (syntax tree, see
  :mod:`fastrag.indexing.chunking.syntax`);
* anything else: :func:`chunk_plain` (paragraphs, lines, words, slices).
"""

from __future__ import annotations

import os

from fastrag.indexing.chunking.markdown import chunk_markdown
from fastrag.indexing.chunking.packer import Chunk, chunk_plain
from fastrag.indexing.chunking.python import chunk_python
from fastrag.indexing.chunking.syntax import chunk_syntax
from fastrag.indexing.languages import GRAMMAR_OF_SUFFIX

__all__ = ["Chunk", "chunk_file", "chunk_markdown", "chunk_plain", "chunk_python", "chunk_syntax"]

_PYTHON = frozenset({".py", ".pyi"})
_MARKDOWN = frozenset({".md", ".markdown"})


def chunk_file(path: str, text: str, max_chunk_size: int, target_size: int | None = None) -> list[Chunk]:
    """Chunk ``text``, the content of ``path``, with the chunker its file name calls for."""
    ext = os.path.splitext(path)[1].lower()
    if ext in _PYTHON:
        return chunk_python(text, max_chunk_size, target_size)
    if ext in _MARKDOWN:
        return chunk_markdown(text, max_chunk_size, target_size)
    if ext == ".rst":
        return chunk_markdown(text, max_chunk_size, target_size, rst=True)
    grammar = GRAMMAR_OF_SUFFIX.get(ext)
    if grammar is not None:
        return chunk_syntax(grammar, text, max_chunk_size, target_size)
    return chunk_plain(text, max_chunk_size, target_size)
