"""fastrag's native BM25 side by side with bm25s, rank_bm25 and tantivy, on identical chunks and tokens.

Usage: ``.venv/bin/python benches/peers.py [--rank-bm25-timed 50] [--batch 1000] [--rounds 5] [--no-write]``

1. Builds a fastrag index of the vLLM corpus with default :class:`~fastrag.indexing.builder.IndexParams` into a
   temporary folder; its chunk table and the texts fastrag indexes (``rel_path``, context, span: see
   ``fastrag.indexing.texts.indexed_texts``) are the documents of every engine.
2. Tokenizes those texts once with fastrag's tokenizer (the index's settings) and hands the *same* token
   lists to every peer: bm25s (numpy backend, method ``lucene``), rank_bm25 (``BM25Okapi``) and tantivy
   (tokens joined by spaces in a field with the ``whitespace`` tokenizer). fastrag builds from the texts.
3. Queries: the 200 public questions (docs + code), tokenized by ``Bm25Index.tokenize`` and de-duplicated
   (fastrag scores each distinct query term once; the peers would count a repeated term twice).
4. Measures, interleaving the engines so that machine load hits all alike: build time, single-query
   latency (top 10), batch throughput (the 200 questions repeated to ``--batch``), peak RSS in a
   subprocess per engine, recall@1/3/5/10 on both public sets (plain top-10 chunks, no de-duplication)
   and the overlap of each engine's top 10 with fastrag's.

Prints a Markdown report and writes it into ``benches/RESULTS.md`` under ``## BM25 engines side by side``
(that section only is replaced). rank_bm25 (~50-150 ms/query) is timed on ``--rank-bm25-timed`` queries
spread over both sets; its recall still covers all 200.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import (
    CORPUS,
    DISPLAY_ROOT,
    RESULTS,
    ROOT,
    SETS,
    Corpus,
    CpuMeter,
    lexical_params,
    machine,
    percentile,
    read_corpus,
    replace_section,
)

from fastrag import _core
from fastrag.evaluation.datasets import ground_truth, load_dataset
from fastrag.evaluation.recall import evaluate
from fastrag.indexing.builder import build_index
from fastrag.indexing.generations import ChunkTable, load_index
from fastrag.retrieval.retriever import Retriever
from fastrag.schemas import AnsweredQuestion, MinimalSearchResults, MinimalSource

SECTION = "## BM25 engines side by side"
K = 10
ENGINES = ("fastrag", "bm25s", "rank_bm25", "tantivy")
#: Queries each memory probe runs after building (search-time buffers count in the peak).
PROBE_QUERIES = 20

Ids = list[int]


# --------------------------------------------------------------------------- data


@dataclass(frozen=True, slots=True)
class Query:
    """A question: its text (for fastrag) and its distinct tokens in order (for the peers)."""

    set_name: str
    text: str
    tokens: list[str]


def read_queries(bm25: _core.Bm25Index) -> tuple[list[Query], dict[str, list[AnsweredQuestion]]]:
    """The public questions of both sets (docs first) and their ground truth."""
    queries: list[Query] = []
    truth: dict[str, list[AnsweredQuestion]] = {}
    for name, path in SETS.items():
        truth[name] = ground_truth(load_dataset(path), path)
        for q in truth[name]:
            queries.append(Query(name, q.question, list(dict.fromkeys(bm25.tokenize(q.question)))))
    return queries, truth


# --------------------------------------------------------------------------- engines


@dataclass(slots=True)
class Engine:
    """A built BM25 engine: top-``K`` chunk ids for one query, and for many on ``threads`` threads."""

    name: str
    search: Callable[[Query], Ids]
    batch: Callable[[list[Query], int], list[Ids]] | None
    note: str = ""
    #: fastrag only: the search from the question's text (tokenizing it), not from its tokens.
    text_search: Callable[[Query], Ids] | None = None


def build_fastrag(corpus: Corpus) -> Engine:
    """fastrag's native index, built from the texts (it tokenizes them itself, on all threads).

    Its single queries get the peers' pre-tokenized query tokens (``search_tokens``); the row
    ``fastrag, text in`` times ``search`` on the question text, tokenizing included.
    """
    index = _core.Bm25Index.build(corpus.texts, k1=corpus.k1, b=corpus.b, **corpus.tokenizer)

    def search(q: Query) -> Ids:
        return list(index.search_tokens(q.tokens, K)[0])

    def batch(qs: list[Query], threads: int) -> list[Ids]:
        return [list(ids) for ids, _ in index.search_batch([q.text for q in qs], K, threads=threads)]

    return Engine("fastrag", search, batch, text_search=lambda q: list(index.search(q.text, K)[0]))


def build_bm25s(corpus: Corpus) -> Engine:
    """bm25s, numpy backend, Lucene BM25 (same idf as fastrag; no ``(k1 + 1)`` factor, a constant)."""
    import bm25s

    model = bm25s.BM25(k1=corpus.k1, b=corpus.b, method="lucene", backend="numpy")
    model.index(corpus.tokens, show_progress=False)

    def top(qs: list[Query], threads: int) -> list[Ids]:
        res = model.retrieve([q.tokens for q in qs], k=K, show_progress=False, n_threads=threads)
        return [[int(d) for d, s in zip(docs, scores) if s > 0] for docs, scores in zip(res.documents, res.scores)]

    return Engine("bm25s", lambda q: top([q], 0)[0], top, "numpy backend; `retrieve(n_threads=…)`: a Python pool")


def build_rank_bm25(corpus: Corpus) -> Engine:
    """rank_bm25's BM25Okapi: idf ``ln((N − df + 0.5)/(df + 0.5))``, floored at 0.25 × mean idf."""
    import numpy as np
    from rank_bm25 import BM25Okapi

    model = BM25Okapi(corpus.tokens, k1=corpus.k1, b=corpus.b)

    def search(q: Query) -> Ids:
        scores = model.get_scores(q.tokens)
        top = np.argpartition(-scores, K)[:K]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [int(d) for d in top if scores[d] > 0]

    return Engine("rank_bm25", search, None, "BM25Okapi: other idf (terms in > N/2 docs get 0.25 × mean idf)")


def build_tantivy(corpus: Corpus) -> Engine:
    """tantivy in RAM: tokens joined by spaces in a ``whitespace``-tokenized field (frequencies, no positions)."""
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("body", tokenizer_name="whitespace", index_option="freq")
    builder.add_integer_field("id", fast=True)
    schema = builder.build()
    index = tantivy.Index(schema)
    writer = index.writer()
    for i, toks in enumerate(corpus.tokens):
        writer.add_document(tantivy.Document(body=" ".join(toks), id=i))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    searcher = index.searcher()

    def search(q: Query) -> Ids:
        if not q.tokens:
            return []
        terms = [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "body", t, "freq")) for t in q.tokens]
        hits = searcher.search(tantivy.Query.boolean_query(terms), K, count=False).hits
        return [int(v) for v in searcher.fast_field_values("id", [addr for _, addr in hits]) if v is not None]

    def batch(qs: list[Query], threads: int) -> list[Ids]:
        if threads == 1:
            return [search(q) for q in qs]
        with ThreadPoolExecutor(threads) as pool:
            return list(pool.map(search, qs))

    return Engine("tantivy", search, batch, "own BM25 (1-byte length norms); batches: a Python thread pool")


BUILDERS: dict[str, Callable[[Corpus], Engine]] = {
    "fastrag": build_fastrag,
    "bm25s": build_bm25s,
    "rank_bm25": build_rank_bm25,
    "tantivy": build_tantivy,
}


# --------------------------------------------------------------------------- memory probe (subprocess)


def _proc_status_kb(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def save_probe_data(folder: Path, corpus: Corpus, queries: list[Query]) -> None:
    """Write what the memory probes load: texts, token lists (each distinct token stored once) and the rest.

    The probes read these instead of rebuilding the corpus, so that no large temporary is freed before
    their baseline (freed Python memory stays in the process and would hide the engine's allocations).
    """
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "texts.pkl").open("wb") as f:
        pickle.dump(corpus.texts, f, protocol=pickle.HIGHEST_PROTOCOL)
    with (folder / "tokens.pkl").open("wb") as f:
        pickle.dump(corpus.tokens, f, protocol=pickle.HIGHEST_PROTOCOL)
    with (folder / "meta.pkl").open("wb") as f:
        pickle.dump((corpus.k1, corpus.b, corpus.tokenizer, queries), f, protocol=pickle.HIGHEST_PROTOCOL)


def probe(engine: str, data_dir: Path, index_dir: Path) -> dict[str, float]:
    """Build ``engine`` (or, for ``fastrag-load``, load the saved index) in this process; memory and time.

    Loads only the inputs the engine needs (see :func:`save_probe_data`), then resets the peak RSS
    (``/proc/self/clear_refs``): ``peak_mb`` is the highest RSS above that baseline while building and
    running :data:`PROBE_QUERIES` queries, ``held_mb`` what is still held at the end.
    """

    def load(name: str) -> Any:
        with (data_dir / name).open("rb") as f:
            return pickle.load(f)

    k1, b, tokenizer, queries = load("meta.pkl")
    texts = load("texts.pkl") if engine == "fastrag" else []
    tokens = load("tokens.pkl") if engine not in ("fastrag", "fastrag-load") else []
    corpus = Corpus(texts, tokens, k1, b, tokenizer)
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")
    base = _proc_status_kb("VmRSS")
    started = time.perf_counter()
    search = _load_fastrag(index_dir) if engine == "fastrag-load" else BUILDERS[engine](corpus).search
    seconds = time.perf_counter() - started
    for q in queries[:PROBE_QUERIES]:
        search(q)
    peak, now = _proc_status_kb("VmHWM"), _proc_status_kb("VmRSS")
    return {"build_s": seconds, "peak_mb": (peak - base) / 1024, "held_mb": (now - base) / 1024}


def _load_fastrag(index_dir: Path) -> Callable[[Query], Ids]:
    """Single-query search of the saved index, loaded from disk."""
    bm25 = load_index(index_dir).bm25
    return lambda q: list(bm25.search(q.text, K)[0])


def run_probe(engine: str, data_dir: Path, index_dir: Path) -> dict[str, float] | None:
    """:func:`probe` in a fresh interpreter (``None`` if it failed: the error is printed)."""
    cmd = [sys.executable, __file__, "--probe", engine, "--data-dir", str(data_dir), "--index-dir", str(index_dir)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        print(f"memory probe of {engine} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


# --------------------------------------------------------------------------- measuring


@dataclass(slots=True)
class Row:
    """Everything measured for one engine."""

    name: str
    build_s: float = 0.0
    latency_us: list[float] = field(default_factory=list)
    batch_ms: dict[int, list[float]] = field(default_factory=dict)
    top: list[Ids] = field(default_factory=list)
    recall: dict[str, dict[int, float]] = field(default_factory=dict)
    overlap: float = float("nan")
    top1: float = float("nan")
    memory: dict[str, float] | None = None
    note: str = ""


def timed_latency(
    engines: list[Engine], rows: dict[str, Row], queries: list[Query], rounds: int, slow: dict[str, int]
) -> None:
    """Time single-query calls: ``rounds`` rounds, each engine answering every query in a block, the
    order of the engines rotating from round to round; keep the first round's results.

    Blocks (not one query of each engine in turn) keep each engine's working set as warm as it is in
    use; rotating the blocks spreads changes of machine load over all engines. An engine named in
    ``slow`` is timed in one round, on that many queries spread evenly over the list; it answers the
    others untimed, so that its recall still covers the whole set.
    """
    for r in range(rounds):
        shift = r % len(engines)
        for e in engines[shift:] + engines[:shift]:
            if e.name in slow and r > 0:
                continue
            picked = range(0, len(queries), max(1, len(queries) // slow[e.name])) if e.name in slow else None
            timed = set(picked) if picked is not None else None
            for q in queries[:5]:  # warm-up: first-call costs and cold caches are not latency
                e.search(q)
            for i, q in enumerate(queries):
                t0 = time.perf_counter_ns()
                ids = e.search(q)
                elapsed = time.perf_counter_ns() - t0
                if r == 0:
                    rows[e.name].top.append(ids)
                if timed is None or i in timed:
                    rows[e.name].latency_us.append(elapsed / 1000)


def timed_batches(engines: list[Engine], rows: dict[str, Row], queries: list[Query], rounds: int) -> None:
    """``rounds`` rounds; in each, every engine answers the whole batch on 1 then 2 threads."""
    for r in range(rounds):
        order = engines if r % 2 == 0 else engines[::-1]
        for e in order:
            if e.batch is None:
                continue
            for threads in (1, 2):
                gc.collect()
                t0 = time.perf_counter()
                out = e.batch(queries, threads)
                rows[e.name].batch_ms.setdefault(threads, []).append((time.perf_counter() - t0) * 1000)
                if len(out) != len(queries):
                    raise RuntimeError(f"{e.name} answered {len(out)} of {len(queries)} queries")


def recall_of(
    tops: list[Ids], queries: list[Query], truth: dict[str, list[AnsweredQuestion]], chunks: ChunkTable
) -> dict[str, dict[int, float]]:
    """recall@1/3/5/10 per public set of plain top-10 chunk lists (no de-duplication)."""
    out: dict[str, dict[int, float]] = {}
    for name, questions in truth.items():
        mine = [ids for ids, q in zip(tops, queries) if q.set_name == name]
        results = []
        for q, ids in zip(questions, mine):
            spans = [chunks.span(i) for i in ids]
            sources = [MinimalSource(file_path=p, first_character_index=s, last_character_index=e) for p, s, e in spans]
            results.append(
                MinimalSearchResults(question_id=q.question_id, question=q.question, retrieved_sources=sources)
            )
        out[name] = evaluate(results, questions).recall
    return out


def agreement(tops: list[Ids], reference: list[Ids]) -> tuple[float, float]:
    """Mean share of the reference's top 10 also in ``tops``' top 10, and the share with the same top 1."""
    shares = [len(set(a) & set(b)) / len(b) for a, b in zip(tops, reference) if b]
    same1 = [bool(a) and a[0] == b[0] for a, b in zip(tops, reference) if b]
    return statistics.mean(shares), statistics.mean(same1)


# --------------------------------------------------------------------------- report


def _r(recall: dict[int, float]) -> str:
    return "/".join(f"{recall[k]:.2f}".lstrip("0") for k in (1, 3, 5, 10))


def _med(values: list[float] | None, fmt: str = "{:.0f}") -> str:
    return fmt.format(statistics.median(values)) if values else "—"


def _table_row(r: Row, p50: dict[str, float]) -> str:
    """One row of the engines table (``—`` for what was not measured)."""
    lat = r.latency_us
    ratio = f"{p50[r.name] / p50['fastrag']:.1f}×" if r.name in p50 else "—"
    cells = [
        r.name,
        f"{r.build_s:.2f}" if r.build_s else "—",
        _med(lat),
        f"{percentile(lat, 99):.0f}" if lat else "—",
        ratio,
        _med(r.batch_ms.get(1)),
        _med(r.batch_ms.get(2)),
        f"{r.memory['peak_mb']:.0f}" if r.memory else "—",
        _r(r.recall["docs"]),
        _r(r.recall["code"]),
        "—" if math.isnan(r.overlap) else f"{r.overlap:.2f} / {r.top1:.2f}",
    ]
    return "| " + " | ".join(cells) + " |"


def report(rows: list[Row], ctx: dict[str, Any]) -> str:
    """The Markdown section: context, the table, the acceptance checks and notes."""
    fr = rows[0]
    p50 = {r.name: statistics.median(r.latency_us) for r in rows if r.latency_us}
    lines = [
        SECTION,
        "",
        "Written by `benches/peers.py` (re-run replaces this section).",
        "",
        machine(),
        (
            f"- corpus: {ctx['chunks']} chunks of a default fastrag index of vLLM 0.10.1 ({ctx['files']} files, "
            f"{ctx['tokens'] / 1e6:.2f} M tokens, {ctx['terms']} distinct); fastrag `build_index` "
            f"full pipeline without vectors {ctx['pipeline_s']:.1f} s; `tokenize_batch` of all chunk texts "
            f"{ctx['tokenize_s']:.1f} s"
        ),
        (
            f"- queries: {ctx['queries']} public questions (docs + code); batches: those repeated to {ctx['batch']}; "
            f"top {K}; latency: every single-query call of {ctx['latency_rounds']} rounds, each engine answering all "
            f"queries in a block, engines rotating between rounds; batches: median of {ctx['rounds']} rounds, "
            "engines alternating"
        ),
        (
            f"- load from other processes during the run: {ctx['foreign']:.2f} of {os.cpu_count()} cores on average "
            f"(load average at the end {ctx['loadavg']:.2f}); absolute times move with it, the ratios less"
        ),
        "",
        (
            "| engine | build s | p50 µs | p99 µs | p50 vs fastrag | batch 1 thr ms | batch 2 thr ms "
            "| peak RSS Δ MB | docs R@1/3/5/10 | code R@1/3/5/10 | top-10 overlap / same top-1 |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_table_row(r, p50) for r in rows]
    bm = next((r for r in rows if r.name == "bm25s"), None)
    batch2 = statistics.median(fr.batch_ms[2])
    lines += ["", "Acceptance:", ""]
    if bm is not None:
        ratio = p50["bm25s"] / p50["fastrag"]
        mean_ratio = statistics.mean(bm.latency_us) / statistics.mean(fr.latency_us)
        lines.append(
            f"- per query, fastrag vs bm25s numpy: p50 {p50['fastrag']:.0f} µs vs {p50['bm25s']:.0f} µs = "
            f"**{ratio:.1f}×** (mean {mean_ratio:.1f}×; target ≥ 10×: {'PASS' if ratio >= 10 else 'FAIL'})"
        )
    lines.append(
        f"- {ctx['batch']} queries in one `search_batch` call on 2 threads: median **{batch2:.1f} ms** "
        f"(best {min(fr.batch_ms[2]):.1f} ms, 1 thread {statistics.median(fr.batch_ms[1]):.1f} ms; "
        f"target ≤ 50 ms: {'PASS' if batch2 <= 50 else 'FAIL'})"
    )
    lines += ["", "Notes:", ""]
    lines += [
        (
            "- Every engine indexes the same token lists (fastrag's tokenizer; fastrag builds from the texts, so its "
            "build time includes tokenizing, the peers' do not). Every engine, fastrag included (`search_tokens`), "
            "gets the same pre-tokenized, de-duplicated query tokens; `fastrag, text in` is `search` on the "
            "question's text, tokenizing included."
        ),
        (
            "- Recall and overlap use each engine's plain top 10 chunks (no de-duplication of overlapping spans); "
            "overlap = mean share of fastrag's top 10 that the engine also returns; same top-1 = share of queries "
            "with the same best chunk. Ties may be ordered differently."
        ),
        (
            f"- peak RSS Δ: highest RSS above the baseline (corpus already loaded), building and running "
            f"{PROBE_QUERIES} queries, each engine in its own process. `fastrag-load` = `Bm25Index.load` of the "
            f"saved index: {ctx['load_note']}."
        ),
        (
            f"- `fastrag Retriever`: the shipped path (`Retriever.search` over this index, which has no "
            f"vectors: lexical; {K} spans from {K * 3} candidates, overlapping spans of a file de-duplicated); "
            "its build column is blank (same index)."
        ),
    ]
    lines += [f"- {r.name}: {r.note}" for r in rows if r.note]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- main


def main() -> None:
    """Build, measure, print and record."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rank-bm25-timed", type=int, default=50, help="queries rank_bm25 is timed on")
    parser.add_argument("--batch", type=int, default=1000, help="queries per batch")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved batch rounds")
    parser.add_argument("--latency-rounds", type=int, default=3, help="interleaved single-query rounds")
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    parser.add_argument("--no-memory", action="store_true", help="skip the per-engine memory subprocesses")
    parser.add_argument("--no-write", action="store_true", help=f"do not update {RESULTS.relative_to(ROOT)}")
    parser.add_argument("--probe", help=argparse.SUPPRESS)
    parser.add_argument("--index-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        print(json.dumps(probe(args.probe, args.data_dir, args.index_dir)))
        return
    if "fastrag" not in args.engines:
        parser.error("fastrag is the reference: keep it in --engines")
    started = time.perf_counter()
    meter = CpuMeter()
    with tempfile.TemporaryDirectory(prefix="fastrag-peers-") as tmp:
        index_dir, data_dir = Path(tmp) / "index", Path(tmp) / "probe"
        say(f"indexing {CORPUS.relative_to(ROOT)} with default parameters ...")
        built = build_index(CORPUS, index_dir, lexical_params(), display_root=DISPLAY_ROOT, progress=False)
        corpus, chunks, bm25, tokenize_s = read_corpus(index_dir)
        queries, truth = read_queries(bm25)
        if not args.no_memory:
            save_probe_data(data_dir, corpus, queries)
        ctx: dict[str, Any] = {
            "chunks": len(chunks),
            "files": built.files,
            "tokens": sum(map(len, corpus.tokens)),
            "terms": bm25.num_terms,
            "pipeline_s": built.seconds,
            "tokenize_s": tokenize_s,
            "queries": len(queries),
            "batch": args.batch,
            "rounds": args.rounds,
            "latency_rounds": args.latency_rounds,
        }
        say(f"{len(chunks)} chunks, {ctx['tokens']} tokens; building the engines ...")
        engines: list[Engine] = []
        rows: dict[str, Row] = {}
        for name in args.engines:
            gc.collect()
            t0 = time.perf_counter()
            engine = BUILDERS[name](corpus)
            rows[name] = Row(name, build_s=time.perf_counter() - t0, note=engine.note)
            engines.append(engine)
            say(f"  {name}: {rows[name].build_s:.2f} s")
        retriever = Retriever.open(index_dir)
        shipped, text_in = Row("fastrag Retriever"), Row("fastrag, text in")
        timing = {**rows, shipped.name: shipped, text_in.name: text_in}
        shipped_engine = Engine(shipped.name, lambda q: [len(retriever.search(q.text, K))], None)
        assert engines[0].text_search is not None
        text_engine = Engine(text_in.name, engines[0].text_search, None)
        say("single-query latency ...")
        timed_latency(
            [*engines[:1], text_engine, shipped_engine, *engines[1:]],
            timing,
            queries,
            args.latency_rounds,
            {"rank_bm25": args.rank_bm25_timed},
        )
        if "rank_bm25" in rows:
            rows["rank_bm25"].note += (
                f"; latency timed on {len(rows['rank_bm25'].latency_us)} of the {len(queries)} queries in one round "
                "(it is that slow); recall and overlap on all of them; no batch API"
            )
        say("batches ...")
        repeated = [queries[i % len(queries)] for i in range(args.batch)]
        timed_batches(engines, rows, repeated, args.rounds)
        shipped.recall = _retriever_recall(retriever, queries, truth)

        for row in [*rows.values(), text_in]:
            row.recall = recall_of(row.top, queries, truth, chunks)
            row.overlap, row.top1 = agreement(row.top, rows["fastrag"].top)
        del engines, corpus
        gc.collect()
        ctx["load_note"] = "not measured"
        if not args.no_memory:
            say("memory, one subprocess per engine ...")
            for name in args.engines:
                mem = rows[name].memory = run_probe(name, data_dir, index_dir)
                if mem is not None:
                    rows[name].build_s = min(rows[name].build_s, mem["build_s"])
            loaded = run_probe("fastrag-load", data_dir, index_dir)
            if loaded is not None:
                ctx["load_note"] = (
                    f"{loaded['peak_mb']:.0f} MB peak, {loaded['held_mb']:.0f} MB held, "
                    f"{loaded['build_s'] * 1000:.0f} ms"
                )
    ctx["foreign"] = meter.foreign_cores()
    ctx["loadavg"] = os.getloadavg()[0]
    ordered = [rows[n] for n in args.engines]
    ordered[1:1] = [text_in, shipped]
    text = report(ordered, ctx)
    print(text)
    if not args.no_write:
        replace_section(RESULTS, SECTION, text)
        say(f"wrote {RESULTS.relative_to(ROOT)} ({time.perf_counter() - started:.0f} s in all)")


def _retriever_recall(
    retriever: Retriever, queries: list[Query], truth: dict[str, list[AnsweredQuestion]]
) -> dict[str, dict[int, float]]:
    out: dict[str, dict[int, float]] = {}
    for name, questions in truth.items():
        hits = retriever.search_many([q.question for q in questions], K)
        results = [
            MinimalSearchResults(
                question_id=q.question_id,
                question=q.question,
                retrieved_sources=[
                    MinimalSource(file_path=h.file_path, first_character_index=h.start, last_character_index=h.end)
                    for h in hs
                ],
            )
            for q, hs in zip(questions, hits)
        ]
        out[name] = evaluate(results, questions).recall
    return out


def say(message: str) -> None:
    """Progress on stderr (the report goes to stdout)."""
    print(message, file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
