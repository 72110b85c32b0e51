"""Retrieval over a whole question set, written as a results file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tqdm import tqdm

from fastrag.config import DEFAULT_MODE
from fastrag.evaluation.datasets import load_dataset, output_path, write_results
from fastrag.retrieval.filters import SearchFilter
from fastrag.retrieval.retriever import Retriever, hits_to_sources
from fastrag.schemas import MinimalSearchResults, StudentSearchResults

#: Questions per native batch call (progress is reported between batches).
BATCH = 256


def search_dataset(
    dataset_path: Path,
    k: int,
    save_directory: Path,
    index_dir: Path,
    progress: bool = True,
    mode: str = DEFAULT_MODE,
    search_filter: SearchFilter | None = None,
    repos: Sequence[str] = (),
) -> tuple[Path, int]:
    """Retrieve ``k`` spans for every question of ``dataset_path``; return the output path and count.

    ``search_filter``: only spans of the files it accepts. ``repos``: of a sharded index, the
    shards searched (default: all).

    Every input is checked before any work starts, and the output is written atomically.
    """
    dataset = load_dataset(dataset_path)
    target = output_path(dataset_path, save_directory)
    retriever = Retriever.open(index_dir, repos=repos)
    allowed = search_filter.mask(retriever.index) if search_filter is not None else None
    questions = dataset.rag_questions
    results: list[MinimalSearchResults] = []
    with tqdm(total=len(questions), desc="searching", unit="q", disable=not progress) as bar:
        for lo in range(0, len(questions), BATCH):
            batch = questions[lo : lo + BATCH]
            for q, hits in zip(batch, retriever.search_many([q.question for q in batch], k, mode, allowed=allowed)):
                sources = hits_to_sources(hits)
                results.append(
                    MinimalSearchResults(question_id=q.question_id, question=q.question, retrieved_sources=sources)
                )
            bar.update(len(batch))
    write_results(target, StudentSearchResults(search_results=results, k=k))
    return target, len(results)
