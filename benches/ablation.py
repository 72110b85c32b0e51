"""Ablation of the retrieval stages: recall@1/3/5/10 on both public sets, one row per configuration.

Usage: ``python benches/ablation.py [--index_dir data/processed-ablation] [--rounds 5] [--no-write]``
(``make ablation``)

Rows: lexical, vector and hybrid search without and with the precision stage
(:mod:`fastrag.retrieval.precision`), another file-name weight, and the query-side and span-side
alternatives that were measured and not kept: identifier variants appended to the query at full
BM25 weight, pseudo-relevance feedback (the top terms of the first three chunks appended to the
query) and re-cut spans. The halves columns are recall@5 on the even- and odd-numbered questions.
The weights themselves are fitted by pooled cross-validation (``benches/cv.py``).
Then the cost of the precision stage: ``search_dataset`` processes and warm batches of 1000
questions with the stage off and on, alternately.

The index needs vectors: when ``--index_dir`` holds no index, one is built there from
``data/raw/vllm-0.10.1`` with ``--vectors docs`` (about 15–30 s on 2 cores). The table replaces
the ``## Ablation`` section of ``benches/RESULTS.md`` (written atomically).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from common import replace_section, shown

from fastrag import _core
from fastrag.evaluation.datasets import ground_truth, load_dataset
from fastrag.evaluation.recall import evaluate
from fastrag.indexing.builder import IndexParams, build_index
from fastrag.retrieval.precision import Precision, shipped_weights
from fastrag.retrieval.query import identifier_variants
from fastrag.retrieval.retriever import Hit, Retriever, hits_to_sources
from fastrag.schemas import AnsweredQuestion, MinimalSearchResults

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "data/raw/vllm-0.10.1"
DISPLAY_ROOT = "data/raw/vllm-0.10.1"
SETS = {s: ROOT / f"data/datasets/AnsweredQuestions/dataset_{s}_public.json" for s in ("docs", "code")}
RESULTS = ROOT / "benches/RESULTS.md"
SECTION = "## Ablation"
K = 10

Search = Callable[[Retriever, list[str]], list[list[Hit]]]


@dataclass(frozen=True, slots=True)
class Config:
    """One row: a name, how it searches, and a note on what it shows."""

    name: str
    search: Search
    note: str = ""


@dataclass(frozen=True, slots=True)
class Row:
    """Measured recall of one configuration."""

    config: Config
    recall: dict[str, dict[int, float]]
    halves: dict[str, tuple[float, float]]
    seconds: float


@contextmanager
def weights(retriever: Retriever, name: float) -> Iterator[None]:
    """Run with another file-name weight in the precision stage."""
    old = retriever.precision
    index = retriever.index
    relative = [name, *shipped_weights()[1:]]  # the file-name weight of queries with no trait
    retriever.precision = Precision(index.bm25, index.chunks.paths, index.chunks.file, index.definitions, relative)
    try:
        yield
    finally:
        retriever.precision = old


@contextmanager
def focus(retriever: Retriever, width: int) -> Iterator[None]:
    """Run with spans re-cut to ``width`` characters."""
    old = retriever.focus
    retriever.focus = width
    try:
        yield
    finally:
        retriever.focus = old


def plain(mode: str, precision: bool) -> Search:
    """The shipped search in ``mode``, with or without the precision stage."""
    return lambda r, qs: r.search_many(qs, K, mode, precision=precision)


def weighted(mode: str, name: float) -> Search:
    """The precision stage with another file-name weight."""

    def run(r: Retriever, qs: list[str]) -> list[list[Hit]]:
        with weights(r, name):
            return r.search_many(qs, K, mode, precision=True)

    return run


def appended_variants(mode: str) -> Search:
    """Identifier variants appended to the query text (full BM25 weight)."""

    def run(r: Retriever, qs: list[str]) -> list[list[Hit]]:
        bm25 = r.index.bm25
        expanded = [f"{q}\n{' '.join(identifier_variants(q, bm25))}" if q.strip() else q for q in qs]
        return r.search_many(expanded, K, mode, precision=True)

    return run


def feedback(mode: str, chunks: int = 3, terms: int = 5) -> Search:
    """Pseudo-relevance feedback: the ``terms`` best terms (documents × idf) of the first
    ``chunks`` results appended to the query, then the search again (precision on)."""

    def run(r: Retriever, qs: list[str]) -> list[list[Hit]]:
        bm25 = r.index.bm25
        first = r.search_many(qs, chunks, mode, precision=True)
        texts: dict[str, str] = {}
        expanded = []
        for q, hits in zip(qs, first):
            seen: Counter[str] = Counter()
            spans = []
            for h in hits:
                if h.file_path not in texts:
                    texts[h.file_path] = (CORPUS / h.file_path[len(DISPLAY_ROOT) + 1 :]).read_text(encoding="utf-8")
                spans.append(texts[h.file_path][h.start : h.end])
            for tokens in _core.tokenize_batch(spans, bm25.stopwords, bm25.min_len, bm25.parts, bm25.stem):
                seen.update(set(tokens))
            known = set(bm25.tokenize(q))
            ranked = sorted(((n * bm25.idf(t), t) for t, n in seen.items() if n >= 2 and t not in known), reverse=True)
            extra = " ".join(t for _, t in ranked[:terms])
            expanded.append(f"{q}\n{extra}" if extra and q.strip() else q)
        return r.search_many(expanded, K, mode, precision=True)

    return run


def recut(mode: str, width: int) -> Search:
    """The precision stage with spans re-cut to ``width`` characters."""

    def run(r: Retriever, qs: list[str]) -> list[list[Hit]]:
        with focus(r, width):
            return r.search_many(qs, K, mode, precision=True)

    return run


CONFIGS = [
    Config("lexical", plain("lexical", False), "BM25 alone"),
    Config("lexical + precision", plain("lexical", True)),
    Config("vector", plain("vector", False), "only Markdown/reST chunks have vectors"),
    Config("vector + precision", plain("vector", True), "file names"),
    Config("hybrid", plain("hybrid", False), "RRF 1 : 0.25, cosine gate 0.6"),
    Config("**hybrid + precision (default)**", plain("hybrid", True), "file-name weight learned (benches/cv.py)"),
    Config("hybrid + precision, file-name weight 0.2", weighted("hybrid", 0.2), "another weight"),
    Config("hybrid + precision, variants appended to the query", appended_variants("hybrid"), "not kept"),
    Config("hybrid + precision + pseudo-relevance feedback", feedback("hybrid"), "3 chunks, 5 terms; not kept"),
    Config("hybrid + precision, spans re-cut to 1,500", recut("hybrid", 1500), "not kept"),
    Config("hybrid + precision, spans re-cut to 1,000", recut("hybrid", 1000), "not kept"),
    Config("hybrid + precision, spans re-cut to 600", recut("hybrid", 600), "not kept"),
]


def measure(retriever: Retriever, config: Config, truth: dict[str, list[AnsweredQuestion]]) -> Row:
    """Recall of ``config`` on both sets, and its halves."""
    recall: dict[str, dict[int, float]] = {}
    halves: dict[str, tuple[float, float]] = {}
    seconds = 0.0
    for name, questions in truth.items():
        started = time.perf_counter()
        hits = config.search(retriever, [q.question for q in questions])
        seconds += time.perf_counter() - started
        results = [
            MinimalSearchResults(question_id=q.question_id, question=q.question, retrieved_sources=hits_to_sources(h))
            for q, h in zip(questions, hits)
        ]
        recall[name] = evaluate(results, questions).recall
        halves[name] = (
            evaluate(results[0::2], questions[0::2]).recall[5],
            evaluate(results[1::2], questions[1::2]).recall[5],
        )
    return Row(config, recall, halves, seconds)


def table(rows: Sequence[Row]) -> str:
    """The Markdown table of ``rows``."""
    lines = [
        "| configuration | docs R@1/3/5/10 | code R@1/3/5/10 | R@5 even / odd: docs | code | 200 q, s | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        cells = ["/".join(f"{row.recall[s][k]:.2f}".lstrip("0") for k in (1, 3, 5, 10)) for s in ("docs", "code")]
        halves = [" / ".join(f"{x:.2f}".lstrip("0") for x in row.halves[s]) for s in ("docs", "code")]
        lines.append(
            f"| {row.config.name} | {cells[0]} | {cells[1]} | {halves[0]} | {halves[1]} "
            f"| {row.seconds:.2f} | {row.config.note} |"
        )
    return "\n".join(lines) + "\n"


def section(rows: Sequence[Row], index_dir: Path, load: tuple[float, float], timing: str, rounds: int) -> str:
    """The ``## Ablation`` section."""
    times = (
        f"\nCost of the precision stage (medians of {rounds} alternating rounds, same run; the process "
        "times include Python start, index load and, in hybrid mode, the embedding model):\n\n" + timing
        if timing
        else ""
    )
    return (
        f"{SECTION}\n\n"
        "Written by `benches/ablation.py` (`make ablation`; a re-run replaces this section).\n\n"
        f"- date: {time.strftime('%Y-%m-%d %H:%M %Z')}; {platform.platform()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} cores; load average {load[0]:.1f} before, {load[1]:.1f} after\n"
        f"- index: `{shown(index_dir)}` "
        "(vLLM 0.10.1, default chunking, `--vectors docs`); 100 docs + 100 code public questions, k = 10, "
        "recall by the grading rule\n"
        "- `200 q, s`: wall time of the configuration's `search_many` calls in this process (both sets, "
        "warm; the first vector row includes loading the embedding model)\n\n" + table(rows) + times
    )


CLI = (
    "import sys, fastrag.retrieval.retriever as r; r.PRECISION = sys.argv.pop(1) == 'on'; "
    "from fastrag.cli import main; sys.exit(main())"
)


def cli_wall(index_dir: Path, mode: str, precision: bool, out: Path) -> float:
    """Wall time of one ``search_dataset`` process (100 code questions, k = 10), start included."""
    dataset = ROOT / "data/datasets/UnansweredQuestions/dataset_code_public.json"
    args = ["search_dataset", "--dataset_path", str(dataset), "--index_dir", str(index_dir)]
    args += ["--mode", mode, "--save_directory", str(out)]
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", CLI, "on" if precision else "off", *args], check=True, capture_output=True)
    return time.perf_counter() - started


def timings(retriever: Retriever, index_dir: Path, questions: list[str], rounds: int) -> str:
    """Search time without and with the precision stage, measured alternately in one run."""
    lines = [
        "| what | mode | precision off, s | precision on, s | on / off |",
        "|---|---|---|---|---|",
    ]
    batch = (questions * (1000 // len(questions) + 1))[:1000]
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("lexical", "hybrid"):
            walls: dict[bool, list[float]] = {False: [], True: []}
            warm: dict[bool, list[float]] = {False: [], True: []}
            retriever.search_many(batch[:20], K, mode)  # load the embedder before timing
            for _ in range(rounds):
                for precision in (False, True):
                    walls[precision].append(cli_wall(index_dir, mode, precision, Path(tmp)))
                    started = time.perf_counter()
                    retriever.search_many(batch, K, mode, precision=precision)
                    warm[precision].append(time.perf_counter() - started)
            for what, series in (("`search_dataset` process, 100 questions", walls), ("warm, 1000 questions", warm)):
                off, on = statistics.median(series[False]), statistics.median(series[True])
                lines.append(f"| {what} | {mode} | {off:.2f} | {on:.2f} | {on / off:.2f} |")
    return "\n".join(lines) + "\n"


def ensure_index(index_dir: Path) -> None:
    """Bring the index with vectors in ``index_dir`` up to date (incremental: a check when nothing
    changed; a rebuild when the chunking or its parameters did, so the table never measures a stale
    index)."""
    if not CORPUS.is_dir():
        sys.exit(f"ablation: error: no corpus at {CORPUS} (run `make data`)")
    print(f"indexing {DISPLAY_ROOT} with vectors into {index_dir} (incremental) ...", file=sys.stderr, flush=True)
    build_index(CORPUS, index_dir, IndexParams(embed="docs"), display_root=DISPLAY_ROOT, progress=True)


def main() -> None:
    """Measure every configuration, print the table, record it."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index_dir", type=Path, default=ROOT / "data/processed-ablation")
    parser.add_argument("--no-write", action="store_true", help="print only; leave benches/RESULTS.md alone")
    parser.add_argument("--rounds", type=int, default=5, help="alternating timing rounds (0: no timings)")
    args = parser.parse_args()
    missing = [p for p in SETS.values() if not p.is_file()]
    if missing:
        sys.exit(f"ablation: error: no dataset at {missing[0]} (run `make data`)")
    index_dir = args.index_dir.resolve()
    ensure_index(index_dir)
    retriever = Retriever.open(index_dir)
    if not retriever.index.has_vectors:
        sys.exit(f"ablation: error: the index in {index_dir} has no vectors: rebuild it with `index --vectors docs`")
    truth = {name: ground_truth(load_dataset(path), path) for name, path in SETS.items()}
    load_before = os.getloadavg()[0]
    rows = []
    for config in CONFIGS:
        row = measure(retriever, config, truth)
        rows.append(row)
        print(table([row]).splitlines()[-1], flush=True)
    questions = [q.question for qs in truth.values() for q in qs]
    timing = timings(retriever, index_dir, questions, args.rounds) if args.rounds > 0 else ""
    text = section(rows, index_dir, (load_before, os.getloadavg()[0]), timing, args.rounds)
    print("\n" + text)
    if not args.no_write:
        replace_section(RESULTS, SECTION, text)
        print(f"wrote {RESULTS.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
