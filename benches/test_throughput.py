"""End-to-end throughput of fastrag on the vLLM corpus (pytest-benchmark).

Run: ``.venv/bin/python -m pytest benches/test_throughput.py --benchmark-only -q``. Not part of the
normal suite (``testpaths = ["tests"]``). Results go to ``benches/RESULTS.md`` (see ``conftest.py``).
"""

from __future__ import annotations

import inspect
import itertools
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from common import DISPLAY_ROOT, ROOT, SETS

from conftest import BenchLog  # type: ignore[attr-defined]  # benches/conftest.py, not tests/
from fastrag.cli import Commands
from fastrag.config import MODES
from fastrag.evaluation.datasets import load_dataset
from fastrag.indexing.builder import IndexParams, IndexReport, build_index
from fastrag.indexing.chunking import chunk_file
from fastrag.retrieval.retriever import Retriever

K = 10
#: 100 questions, as ``search_dataset`` reads them.
DATASET_100 = ROOT / "data/datasets/UnansweredQuestions/dataset_docs_public.json"


@pytest.fixture(scope="module")
def questions() -> list[str]:
    """The 200 public questions (docs, then code)."""
    return [q.question for path in SETS.values() for q in load_dataset(path).rag_questions]


@pytest.fixture(scope="module")
def retriever(index_dir: Path) -> Retriever:
    """The shipped search path over the session's index."""
    return Retriever.open(index_dir)


def test_build_index_cold(benchmark: Any, bench_log: BenchLog, corpus: Path) -> None:
    """Full index build of the corpus into an empty folder with the default parameters (whatever they
    include: chunking, BM25, vectors), nothing cached."""
    folders: list[tempfile.TemporaryDirectory[str]] = []

    def fresh() -> tuple[tuple[Path, Path, IndexParams], dict[str, Any]]:
        folders.append(tempfile.TemporaryDirectory(prefix="fastrag-bench-"))
        return (corpus, Path(folders[-1].name), IndexParams()), {"display_root": DISPLAY_ROOT, "progress": False}

    try:
        report: IndexReport = benchmark.pedantic(build_index, setup=fresh, rounds=2, iterations=1)
    finally:
        for folder in folders:
            folder.cleanup()
    assert report.chunks > 10_000 and not report.up_to_date
    bench_log.add("build_index, cold", f"{report.files} files → {report.chunks} chunks", benchmark)


def test_reindex_unchanged(benchmark: Any, bench_log: BenchLog, corpus: Path, index_dir: Path) -> None:
    """``build_index`` again with nothing changed: walk and compare fingerprints only."""
    report: IndexReport = benchmark.pedantic(
        build_index,
        args=(corpus, index_dir, IndexParams()),
        kwargs={"display_root": DISPLAY_ROOT, "progress": False},
        rounds=5,
        iterations=1,
        warmup_rounds=1,
    )
    assert report.up_to_date
    bench_log.add("build_index, nothing changed", f"{report.files} files checked", benchmark)


def resolve_mode(case: str, command: str, retriever: Retriever) -> tuple[str, str]:
    """The mode a bench case runs and its label.

    ``default`` is the mode ``python -m fastrag <command>`` uses without ``--mode``, read from the
    command's own signature (so it follows the CLI's default wherever that is defined), on the
    index a plain ``index`` builds; any other case is that mode itself. The label says whether
    the index has vectors: hybrid on an index without them runs the lexical path.
    """
    mode = str(inspect.signature(getattr(Commands, command)).parameters["mode"].default) if case == "default" else case
    assert mode in MODES
    vectors = "with vectors" if retriever.index.has_vectors else "no vectors"
    return mode, f"{case} mode ({mode}, {vectors})" if case == "default" else f"{mode} mode"


@pytest.mark.parametrize("case", ["default", "lexical"])
def test_search_single(
    benchmark: Any, bench_log: BenchLog, retriever: Retriever, questions: list[str], case: str
) -> None:
    """``Retriever.search``, one question per call (cycling through the 200 public questions)."""
    mode, label = resolve_mode(case, "search", retriever)
    cycle = itertools.cycle(questions)
    hits = benchmark(lambda: retriever.search(next(cycle), K, mode=mode))
    assert len(hits) == K
    bench_log.add(f"Retriever.search, {label}", f"1 question, k={K}", benchmark)


@pytest.mark.parametrize("case", ["default", "lexical"])
def test_search_many_1000(
    benchmark: Any, bench_log: BenchLog, retriever: Retriever, questions: list[str], case: str
) -> None:
    """``Retriever.search_many`` of 1000 questions (the 200 public ones repeated) in one call."""
    mode, label = resolve_mode(case, "search_dataset", retriever)
    batch = list(itertools.islice(itertools.cycle(questions), 1000))
    results = benchmark.pedantic(
        retriever.search_many, args=(batch, K), kwargs={"mode": mode}, rounds=5, iterations=1, warmup_rounds=1
    )
    assert len(results) == 1000 and all(results)
    bench_log.add(f"Retriever.search_many, {label}", f"1000 questions, k={K}", benchmark)


@pytest.mark.parametrize("name", ["big.py", "big.md", "big.txt"])
def test_chunk_one_megabyte_line(benchmark: Any, bench_log: BenchLog, name: str) -> None:
    """``chunk_file`` of a single 1 MB line (a string literal), per chunker; the suite checks its work is linear."""
    text = "x = '" + "ab c" * 250_000 + "'\n"
    chunks = benchmark.pedantic(chunk_file, args=(name, text, 2000, 800), rounds=3, iterations=1)
    assert chunks and all(c.end - c.start <= 2000 for c in chunks)
    bench_log.add(f"chunk_file, 1 MB single line, {name}", f"{len(chunks)} chunks", benchmark)


def test_chunk_corpus(benchmark: Any, bench_log: BenchLog, corpus: Path) -> None:
    """``chunk_file`` over every ``.py``/``.md``/``.txt`` file of the corpus (read beforehand), target 800."""
    texts = [
        (str(path), path.read_text(encoding="utf-8"))
        for path in sorted(corpus.rglob("*"))
        if path.suffix in (".py", ".md", ".txt") and path.is_file()
    ]

    def chunk_all() -> int:
        return sum(len(chunk_file(path, text, 2000, 800)) for path, text in texts)

    chunks = benchmark.pedantic(chunk_all, rounds=2, iterations=1)
    assert len(texts) > 1900 and chunks > len(texts)
    bench_log.add("chunk_file, whole corpus", f"{len(texts)} files → {chunks} chunks", benchmark)


def test_search_dataset_subprocess(benchmark: Any, bench_log: BenchLog, index_dir: Path, tmp_path: Path) -> None:
    """``python -m fastrag search_dataset`` on 100 questions, process start and index load included."""
    n = len(load_dataset(DATASET_100).rag_questions)
    cmd = [
        sys.executable,
        "-m",
        "fastrag",
        "search_dataset",
        "--dataset_path",
        str(DATASET_100),
        "--k",
        str(K),
        "--save_directory",
        str(tmp_path),
        "--index_dir",
        str(index_dir),
    ]

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True)

    benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=1)
    assert (tmp_path / DATASET_100.name).is_file()
    bench_log.add("search_dataset (subprocess)", f"{n} questions, k={K}, `python -m fastrag`, default mode", benchmark)


@pytest.fixture(scope="module")
def hybrid_retriever(corpus: Path) -> Retriever:
    """The shipped search path over an index with vectors (``index --vectors docs``).

    Shares ``data/bench/modes-index`` with ``benches/modes.py``: built (or brought up to date,
    re-embedding nothing its cache holds) here.
    """
    from modes import INDEX_DIR, VECTORS

    build_index(corpus, INDEX_DIR, IndexParams(embed=VECTORS), display_root=DISPLAY_ROOT, progress=False)
    return Retriever.open(INDEX_DIR)


def test_hybrid_search_single(
    benchmark: Any, bench_log: BenchLog, hybrid_retriever: Retriever, questions: list[str]
) -> None:
    """Hybrid ``Retriever.search`` (BM25 + query embedding + int8 vectors + RRF), one question per call."""
    assert hybrid_retriever.index.has_vectors
    cycle = itertools.cycle(questions)
    hits = benchmark(lambda: hybrid_retriever.search(next(cycle), K, mode="hybrid"))
    assert len(hits) == K
    bench_log.add("Retriever.search, hybrid with vectors", f"1 question, k={K}", benchmark)


def test_hybrid_search_many_1000(
    benchmark: Any, bench_log: BenchLog, hybrid_retriever: Retriever, questions: list[str]
) -> None:
    """Hybrid ``Retriever.search_many`` of 1000 questions in one warm process (issue 3, B3: ≤ 3 s)."""
    batch = list(itertools.islice(itertools.cycle(questions), 1000))
    results = benchmark.pedantic(
        hybrid_retriever.search_many, args=(batch, K), kwargs={"mode": "hybrid"}, rounds=2, iterations=1,
        warmup_rounds=1,
    )  # fmt: skip
    assert len(results) == 1000 and all(results)
    bench_log.add("Retriever.search_many, hybrid with vectors", f"1000 questions, k={K}", benchmark)


def test_answer_tiny_model(benchmark: Any, bench_log: BenchLog, index_dir: Path, tmp_path: Path) -> None:
    """``fastrag.answering.answer.answer`` end to end with the tiny random Qwen3 of the test suite.

    Measures fastrag's own overhead around generation (retrieval, prompt under a token budget,
    citations, atomic save); the real models' figures are in the Answers section.
    """
    sys.path.insert(0, str(ROOT / "tests"))
    from fastrag.answering.answer import AnswerResult, answer
    from tiny_qwen3 import write_tiny_qwen3

    model = str(write_tiny_qwen3(tmp_path / "tiny-qwen3.gguf"))
    cycle = itertools.cycle(["How do I load a LoRA adapter at runtime?", "Which sampling parameters exist?"])
    out = tmp_path / "out"

    def run() -> AnswerResult:
        return answer(next(cycle), 5, model=model, index_dir=index_dir, save_directory=out, max_new_tokens=16)

    result = benchmark.pedantic(run, rounds=5, iterations=1, warmup_rounds=1)
    assert (
        result.sources and result.saved_to is not None and result.saved_to.parent == out and result.saved_to.is_file()
    )
    bench_log.add("answer, tiny Qwen3 (16 new tokens)", "retrieve 5 + prompt + generate + save", benchmark)
