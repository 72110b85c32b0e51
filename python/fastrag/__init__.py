"""fastrag: retrieval-augmented generation for codebases.

The public API, loaded lazily so that ``python -m fastrag`` pays only for what a command uses::

    import fastrag
    fastrag.build_index(Path("data/raw/vllm-0.10.1"), Path("data/processed"))
    retriever = fastrag.Retriever.open(Path("data/processed"))
    hits = retriever.search("How do I enable LoRA?", k=5)
    many = retriever.search_many(["question one", "question two"], k=10)
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = ["Hit", "IndexParams", "LoadedIndex", "Retriever", "UserError", "build_index", "load_index"]

_EXPORTS = {
    "Hit": "fastrag.retrieval.retriever",
    "Retriever": "fastrag.retrieval.retriever",
    "IndexParams": "fastrag.indexing.builder",
    "LoadedIndex": "fastrag.indexing.generations",
    "build_index": "fastrag.indexing.builder",
    "load_index": "fastrag.indexing.generations",
    "UserError": "fastrag.errors",
}

if TYPE_CHECKING:
    from fastrag.errors import UserError
    from fastrag.indexing.builder import IndexParams, build_index
    from fastrag.indexing.generations import LoadedIndex, load_index
    from fastrag.retrieval.retriever import Hit, Retriever


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fastrag' has no attribute {name!r}")
    return getattr(import_module(module), name)
