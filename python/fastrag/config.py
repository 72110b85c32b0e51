"""Paths and defaults in one place."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

from fastrag import _core
from fastrag.workspace import PROJECT_INDEX_DIR, PROJECT_REPO_PATH, Workspace

#: Corpus indexed when no ``--repo_path`` is given, in the project layout (:mod:`fastrag.workspace`; elsewhere
#: the repository the working directory is in).
DEFAULT_REPO_PATH = PROJECT_REPO_PATH
#: Where the index generations live, in the project layout (elsewhere ``<repository>/.fastrag/index``).
DEFAULT_INDEX_DIR = PROJECT_INDEX_DIR
#: Default output folders of ``search_dataset`` and ``answer_dataset``.
DEFAULT_SEARCH_RESULTS_DIR = Path("data/output/search_results")
DEFAULT_ANSWERS_DIR = Path("data/output/search_results_and_answer")

#: Largest span the grading rule accepts, and the default chunk size.
MAX_CHUNK_SIZE = 2000
#: Largest ``k`` a results file may carry.
MAX_K = 10
#: Default number of results.
DEFAULT_K = 10
#: The search modes: BM25 alone, vectors alone, or both fused.
SearchMode = Literal["lexical", "vector", "hybrid"]
MODES: tuple[SearchMode, ...] = get_args(SearchMode)
#: The default search mode (hybrid is lexical on an index without vectors).
DEFAULT_MODE: SearchMode = "hybrid"
#: Default bound on generated tokens (a concise answer with a citation or two), and the largest accepted.
DEFAULT_MAX_NEW_TOKENS = 80
MAX_NEW_TOKENS = 1024
#: Answers generated at once by ``answer_dataset`` (continuous batching: a new one starts as soon as one
#: ends), and how many are saved to the partial file at a time (measured: benches/RESULTS.md ``## Answers``);
#: the largest accepted.
DEFAULT_BATCH_SIZE = 64
MAX_BATCH_SIZE = 256

#: BM25 parameters: the core's defaults (standard BM25; pooled cross-validation keeps them, see benches/RESULTS.md).
BM25_K1 = _core.DEFAULT_K1
BM25_B = _core.DEFAULT_B
#: Size the chunkers pack pieces up to (≤ max_chunk_size); chosen by measured recall.
CHUNK_TARGET_SIZE = 2000
#: Largest run of Markdown table rows indexed as one extra chunk (table windows, see
#: ``fastrag.indexing.chunking.layers.markdown_layers``); 250-400 gave the same recall on the public sets.
TABLE_WINDOW_SIZE = 400
#: Characters of a section's text indexed with its heading line, after the line, up to the next
#: heading or anchor line: a question asking which page or section covers something names what
#: the section says, not only its title. 100-800 gave the same recall out of fold (benches/RESULTS.md).
HEADING_BODY_SIZE = 400
#: Where model folders (embedder, LLM exports, OpenVINO caches) live: ``data/models`` in the project layout,
#: else ``$FASTRAG_MODELS_DIR`` or the user's cache (:mod:`fastrag.workspace`); decided once per process.
DEFAULT_MODELS_DIR = Workspace.detect().models_dir
#: A staging folder or temporary file older than this is a leftover of a process that died while
#: writing it (a conversion or a compile takes seconds, an export minutes, an index publication
#: seconds), and is removed by the next run even while another process may be writing beside it.
STALE_STAGING_S = 6 * 3600
#: Folder of OpenVINO's compiled-model caches inside a models folder.
OV_CACHE_DIR_NAME = ".ov-cache"


def version() -> str:
    """fastrag's installed version (the package's metadata; ``unknown`` for a tree that was never installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("fastrag")
    except PackageNotFoundError:
        return "unknown"
